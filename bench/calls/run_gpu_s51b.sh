#!/bin/bash
# For the next session (one GPU, < 10 min, carry [".whl", ".kcache"]), issue 8 on log8 records (the fiftieth session
# gave bench_model --scale-dtype log8: method oscar+log8, records of 8 d + 64 bytes, 5.6% fewer than fp16's at
# head_dim 128, so more rows fit the 40 GiB): equal KV memory at 32K for the 8B, then the 4B, each against BF16 with
# cuDNN SDPA in the same run (about 4 minutes each).
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s51b.sh
set -u
T="$(date +%Y-%m-%d)_s51b"
source bench/gpu_env.sh
start_call
eq_memory qwen3-8b 8b_log8 "--scale-dtype log8"
[ $(left) -gt 250 ] && eq_memory qwen3-4b 4b_log8 "--scale-dtype log8"
t done
