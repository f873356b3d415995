#!/bin/bash
# For the next session (one GPU, < 4 min, carry [".whl", ".kcache"]): why log8 records stay slower at 128K batch 1 even
# on variant 14 (paired 7: 141 SASS per tile against 198 on variant 7, and against 163 for fp16 records on 7; fiftieth
# session: log8 v14 33.7 us, v7 33.8-34.0, fp16 v7 31.9). Nsight Compute on one call each of log8 v14, log8 v7 and fp16
# v7 (the forty-ninth session's s49c profiled the last two: fp16 long_sb 16% of stalls, log8 5.8%, log8 issue-bound),
# then the loop's stalls per SASS instruction for log8 v14 (ncu_stalls.py).
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s51c.sh
set -u
T="$(date +%Y-%m-%d)_s51c"
source bench/gpu_env.sh
start_call
for pt in "131072 1 14 log8" "131072 1 7 log8" "131072 1 7 float16"; do
  [ $(left) -gt 60 ] && ncu_point "$pt"
done
[ $(left) -gt 60 ] && ncu_source "131072 1 14 log8"
t done
