#!/bin/bash
# Thirteenth session, device call I (issue 8), < 5 min on one H200 (the machine of call H, still warm), carry
# [".whl", ".kcache"]:  bash bench/calls/run_gpu_s13i.sh
# The 128K row of call H's batch-1 table on the same machine (same command, one context).
set -u
T="$(date +%Y-%m-%d)_s13i"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s13h
timeout 280 python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
  --tput-context 0 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-8b.json" \
  > "$OUT/${T}_bench_model_qwen3-8b.log" 2>&1
t "bench_model rc=$?"; grep -E "oscar_compiled|bf16_compiled|Error|error" "$OUT/${T}_bench_model_qwen3-8b.log" | cut -c1-300
