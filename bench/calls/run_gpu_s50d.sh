#!/bin/bash
# Fiftieth session, the device budget's last ~4 minutes, for an H200 (README's H200 columns are the thirty-fifth
# session's; any card runs it), carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s50d.sh
# issue 7's headline rows with every peer, fp16 and log8 records (the H200 takes VARIANT_RULES_DEFAULT).
set -u
T="$(date +%Y-%m-%d)_s50d"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
issue7_rows 131072,32768 32,1 key --also-log8
t done
