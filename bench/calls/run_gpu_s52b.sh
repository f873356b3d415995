#!/bin/bash
# Fifty-second session, either card (carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s52b.sh
# On an H200 (README's H200 columns are the thirty-fifth session's): issue 7's headline rows with every peer and the
# bare reads, the batch-1 variants, then issue 8's batch-1 table for the Qwen3-8B with what is left. On an H100: issue
# 8's batch-1 table for both models on today's plan (the last whole table is the forty-first session's, s41c).
# One tarball comes back.
set -u
T="$(date +%Y-%m-%d)_s52b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s52
start_call
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  issue7_rows 131072,32768 32,1 key "--also-log8 --read-floor 131072x1,32768x1"
  [ $(left) -gt 330 ] && variant_sweep 131072x1,32768x1 4,7,11,14 var_b1 330
  batch1_table "qwen3-8b"
else
  batch1_table "qwen3-8b qwen3-4b"
fi
t done
pack_out
