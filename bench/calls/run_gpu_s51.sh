#!/bin/bash
# For the next session (one GPU, < 10 min, carry [".whl", ".kcache"]; .kcache: the library of this tree, 53fc8fb8
# unless the .cu changed), whichever card comes:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s51.sh
# An H200 runs run_gpu_s50h.sh (README's H200 columns are the thirty-fifth session's, its variant rows the
# eighteenth's; the fiftieth session got no H200). An H100:
# 1. the log8 GPU tests (the paged cache's plans take the log8 rows since the fiftieth session);
# 2. the plan's rows at 48K-128K x batch 1 / 4, fp16 and log8 records (the new rows' picks and times against the
#    fiftieth session's sweeps);
# 3. the points the fiftieth session's rows left unmeasured: fp16 at 32K b4 (32 pairs below 4096 tiles keep 4), log8
#    at 16K b8, at 400+ pairs (32K b59 / b128) and at head_dim 64 (8 / 64 / 256 pairs), two rounds;
# 4. issue 7's headline rows with every peer, fp16 and log8 records.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then exec bash bench/calls/run_gpu_s50h.sh; fi
set -u
T="$(date +%Y-%m-%d)_s51"
source bench/gpu_env.sh
start_call
log8_tests 100
issue7_rows 131072,98304,65536,49152 1,4 plan "--no-flashinfer --also-log8"
for r in 1 2; do
  [ $(left) -gt 200 ] || break
  variant_sweep 32768x4,16384x4 0,4,7,10,11,14 var_fp16_b4_$r 150
  variant_sweep 16384x8,32768x59,32768x128 0,4,7,10,11 var_log8_$r 150 "--scale-dtype log8"
  variant_sweep 32768x1,131072x1,32768x8,131072x8,32768x32,131072x32 0,4,5,7,10,11 var_log8_d64_$r 150 \
    "--scale-dtype log8 --head-dim 64"
done
[ $(left) -gt 160 ] && issue7_rows 131072,32768 32,1 key --also-log8
t done
