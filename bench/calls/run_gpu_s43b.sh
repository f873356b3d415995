#!/bin/bash
# Forty-third session, after `TAG=s43 bash bench/calls/run_gpu_s42.sh`, for an H200 (its issue 8 rows are the
# thirteenth / twenty-eighth sessions'). Any card, one GPU, < 10 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> [TAG=s46b] bash bench/calls/run_gpu_s43b.sh
# gpu_env.sh's batch1_table, as run_gpu_s41c.sh ran it (issue 8's batch-1 table: Qwen3-8B, then Qwen3-4B, at 8K /
# 32K / 64K / 128K), under the file tag TAG (default s43b), then the 8B's throughput at equal KV memory (40 GiB at 32K) with what
# the call has left.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s43b}"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s43
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
batch1_table "qwen3-8b qwen3-4b"
[ $(left) -ge 200 ] && eq_memory qwen3-8b 8b
