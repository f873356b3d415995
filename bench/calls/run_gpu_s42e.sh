#!/bin/bash
# Forty-second session, after the per-head_dim fill threshold (5a1c273). Any card, one GPU, < 10 min, carry
# [".whl", ".kcache"]:  BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s42e.sh
# On an H200: run_gpu_s42.sh (the filled slots there, then issue 7's whole table on that card). On an H100: the new
# plan through DecodePlan on the card (32K batch 1 head_dim 128 should run 2 + 14 now; 2 + 31 as ours_alt), twice,
# then issue 8's Qwen3-8B row at 32K batch 1 with it (bench_model, compiled, BF16 with cuDNN SDPA).
set -u
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if echo "$CARD" | grep -q H200; then exec bash bench/calls/run_gpu_s42.sh; fi
T="$(date +%Y-%m-%d)_s42e"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s42e
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for i in 1 2; do issue7_rows 32768 1 32k_$i "--alt-splits 32768x1=2+31"; done
[ $(left) -ge 150 ] && timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models qwen3-8b --contexts 32768 \
  --modes compiled --tput-context 0 --fuse-projections --steps 20 --compiled-bf16-backends CUDNN_ATTENTION \
  --out "$OUT/${T}_model.json" > "$OUT/${T}_model.log" 2>&1
t "bench_model 8B 32K rc=$?"; grep -E "speedup|rror" "$OUT/${T}_model.log" | cut -c1-250
