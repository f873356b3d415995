#!/bin/bash
# Thirty-sixth session. Any card, one GPU, < 10 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s36b.sh
# Issue 7's rows with every peer in the same run (128K batch 1 / 32, 32K batch 1 / 32 / 128), then issue 8's
# step_ablate at 128K batch 1 (Qwen3-8B, then Qwen3-4B if time is left), all with this tree's kernel.
# (After it ran, its rows / step_ablate commands moved into bench/gpu_env.sh's issue7_rows / ablate_128k: the same
# commands and files.)
set -u
T="$(date +%Y-%m-%d)_s36b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s36
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
issue7_rows 131072 1,32 128k
issue7_rows 32768 1,32,128 32k
for m in qwen3-8b qwen3-4b; do
  [ $(left) -lt 150 ] && break
  ablate_128k $m
done
