#!/bin/bash
# Next session's first device call (issues 7 and 8), < 10 min on one H200, from the repo root, carry [".whl"]
# (add ".kcache" after `OSCARKV_KERNEL_CACHE=$PWD/.kcache python -c "from oscarkv.kernels import cuda_ops;
# cuda_ops.build()"` on the CPU machine: saves the ~60 s nvcc build on the device):
#   bash bench/run_gpu_next.sh
# 1. GPU tests on the final tree: kernels, the paged transformers path, the compiled step (not all were run
#    after the fourth session's last changes: per-step pinned upload e0f8b83, per-device smem opt-in 5328696).
# 2. bench_model Qwen3-4B 128K b1 with fused projections: does "step" now reach "replay" (was 5.11 vs 4.80 ms)?
# 3. bench_model Qwen3-8B 128K b1 with fused projections (last measured unfused, third session).
set -u
T="$(date +%Y-%m-%d)_next"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_next
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  tests/adversarial/test_nan_propagates.py >> "$OUT/${T}_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -6
timeout 170 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled --tput-context 0 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_4b.json" > "$OUT/${T}_bench_model_4b.log" 2>&1
t "4b rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_4b.log" | cut -c1-300 | tail -4
