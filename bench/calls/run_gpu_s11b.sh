#!/bin/bash
# Eleventh session, device calls B and C (issue 8), < 10 min each on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s11b.sh qwen3-8b     (call B)
#   bash bench/calls/run_gpu_s11b.sh qwen3-4b     (call C)
# Model level with the u8-K kernel: 128K batch 1 and equal KV memory (40 GiB, 32K; OSCAR and BF16 in one run),
# fused projections, compiled + graph-captured steps.
set -u
M=$1
T="$(date +%Y-%m-%d)_s11b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s11b
timeout 560 python3 bench/bench_model.py --models "$M" --contexts 131072 --modes compiled --tput-context 32768 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_$M.json" > "$OUT/${T}_bench_model_$M.log" 2>&1
t "$M rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_$M.log" | cut -c1-400 | tail -6
