#!/bin/bash
# Forty-first session, after s41 / s41b. Any card, one GPU, < 10 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s41c.sh
# Issue 8's batch-1 table at 8K / 32K / 64K / 128K for Qwen3-8B, then Qwen3-4B (random bf16 weights, compiled step
# replayed from a CUDA graph, BF16 with cuDNN SDPA run the same way), with today's kernel and the filled-slots plan;
# the last table of this kind is the thirteenth session's (H200, 8B only). Prints one line per row from the JSON.
set -u
T="$(date +%Y-%m-%d)_s41c"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s41
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
batch1_table "qwen3-8b qwen3-4b"
