#!/bin/bash
# Seventh session, device call C (issue 8), < 10 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s7c.sh
# Model level with the record kernel (main 2f8b9cd's kernel): Qwen3-8B 128K batch 1 and Qwen3-8B at equal
# KV memory (40 GiB, 32K; OSCAR and BF16 in one run), fused projections, compiled + graph-captured steps.
set -u
T="$(date +%Y-%m-%d)_s7c"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s7c
timeout 330 python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled --tput-context 32768 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_8b.json" > "$OUT/${T}_bench_model_8b.log" 2>&1
t "8b rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_8b.log" | cut -c1-400 | tail -5
