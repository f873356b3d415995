#!/bin/bash
# Twenty-fourth session, for the device call after run_gpu_s22b.sh (main, or main with branch fused-rotation-mma
# merged). One GPU, < 10 min, carry [".whl", ".kcache"]. Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s24a.sh
# Issue 8's Qwen3-8B model table with FlashInfer's paged BF16 decode in the BF16 loop (bench_model's FLASHINFER
# backend, new: the BF16 step is now the faster of cuDNN SDPA and FlashInfer, compiled and graph-captured the
# same way). First the GPU test of that baseline (its logits equal the SDPA step's; its step captures).
set -u
T="$(date +%Y-%m-%d)_s24a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s24
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/bench -k gpu > "$OUT/${T}_bench_tests.log" 2>&1
t "bench GPU test rc=$?"; grep -E "^E |FAILED|passed|failed|skipped" "$OUT/${T}_bench_tests.log" | tail -6 | cut -c1-300
timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
  --tput-context 32768 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-8b.json" \
  > "$OUT/${T}_bench_model_qwen3-8b.log" 2>&1
t "bench_model rc=$?"; grep -E "oscar_compiled|bf16_compiled|equal|Error|error" "$OUT/${T}_bench_model_qwen3-8b.log" | cut -c1-400
