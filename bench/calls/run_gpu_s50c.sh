#!/bin/bash
# Fiftieth session, after the variant rows by scale format (one GPU, < 4 min, carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s50c.sh
# 1. the log8 GPU tests (the paged cache's plans now take the log8 rows);
# 2. the plan's rows at 48K-128K x batch 1 / 4, fp16 and log8 records (SDPA peers only: the plan's picks and their
#    times against the sweeps of _s50 / _s50b);
# 3. issue 7's headline rows with every peer, fp16 and log8 records.
set -u
T="$(date +%Y-%m-%d)_s50c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
log8_tests 100
timeout $(( $(left) - 10 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton \
  --no-append --no-flashinfer --contexts 131072,98304,65536,49152 --batches 1,4 --also-log8 \
  --out "$OUT/${T}_plan.json" > "$OUT/${T}_plan.log" 2>&1
t "plan rows rc=$?"; grep -E "^L=|rror" "$OUT/${T}_plan.log" | sed -E 's/\| alt .*\| x/| x/' | cut -c1-260
[ $(left) -gt 110 ] && issue7_rows 131072,32768 32,1 key --also-log8
t done
