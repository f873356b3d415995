#!/bin/bash
# Thirteenth session, device call H (issue 8), < 7 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s13h.sh
# The batch-1 table of issue 8 at 8K, 32K, 64K with today's kernel (128K: twelfth session, call d): Qwen3-8B, compiled
# step in a CUDA graph, fused projections, OSCAR against BF16 (cuDNN) run the same way, ideal from bytes
# (the last multi-context table predates the u8-K kernel and the per-SM split model).
set -u
T="$(date +%Y-%m-%d)_s13h"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s13h
timeout 400 python3 bench/bench_model.py --models qwen3-8b --contexts 8192,32768,65536 --modes compiled \
  --tput-context 0 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-8b.json" \
  > "$OUT/${T}_bench_model_qwen3-8b.log" 2>&1
t "bench_model rc=$?"; grep -E "oscar_compiled|bf16_compiled|Error|error" "$OUT/${T}_bench_model_qwen3-8b.log" | cut -c1-300
