#!/bin/bash
# Fourth session, device call C (issues 7 and 8), < 10 min on one H200, from the repo root, carry [".whl"]:
#   bash bench/calls/run_gpu_s4c.sh
# 1. GPU kernel tests (two-tiles-per-step variants 8-10).
# 2. Sweep of the default rule's variants against the pair variants at 128K b1, 32K b1, 128K b32.
# 3. bench_model Qwen3-4B, compiled step, 128K batch 1 and equal KV memory (32K), fused projections.
set -u
T="$(date +%Y-%m-%d)_s4c"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s4c
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,driver_version --format=csv > "$OUT/${T}_gpu.txt" 2>&1
timeout 220 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -2 "$OUT/${T}_tests.log"
timeout 120 python3 bench/bench_decode.py --no-flashinfer --no-triton --no-append --contexts 131072 --batches 1 \
  --sweep --sweep-points 131072x1,32768x1,131072x32,32768x32 --sweep-variants 0,4,5,8,9,10 --sweep-scales 1.0 \
  --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|^L=" "$OUT/${T}_sweep.log" | cut -c1-160
timeout 250 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled --tput-context 32768 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_4b_fused.json" > "$OUT/${T}_bench_model_4b_fused.log" 2>&1
t "bench_model 4b fused rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_4b_fused.log" | cut -c1-420 | tail -8
