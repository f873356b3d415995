#!/bin/bash
# Fifth session, device call A (issues 7, 8), < 10 min on one H200, from the repo root, carry [".whl", ".kcache"]
# (.kcache: `OSCARKV_KERNEL_CACHE=$PWD/.kcache python -c "from oscarkv.kernels import cuda_ops; cuda_ops.build()"`):
#   bash bench/calls/run_gpu_s5a.sh
# 1. GPU tests on the tree (kernels incl. variant 8; the paged transformers path, the compiled step, NaN).
# 2. Fixed-cost diagnosis with the new probes (launch only, no merge, loads only) at 128K / 32K batch 1, and
#    variants 0 / 4 / 8 (8: 4 warps x 5 CTAs per SM, <= 96 registers) at batch 1, 32 and 59.
# 3. bench_model Qwen3-4B 128K b1, fused projections: does "step" now reach "replay" (pinned per-step upload)?
set -u
T="$(date +%Y-%m-%d)_s5a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s5a
timeout 170 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  tests/adversarial/test_nan_propagates.py >> "$OUT/${T}_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -6
timeout 150 python3 bench/bench_decode.py --no-flashinfer --no-triton --no-append --contexts 131072 --batches 1 \
  --diag 131072x1:4,32768x1:4,131072x1:8 --sweep --sweep-points 131072x1,32768x1,131072x32,32768x59 \
  --sweep-variants 0,4,8 --sweep-scales 1.0 --out "$OUT/${T}_diag.json" > "$OUT/${T}_diag.log" 2>&1
t "diag rc=$?"; grep -E "^diag|^sweep|^L=|copy band" "$OUT/${T}_diag.log" | cut -c1-600
timeout 170 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled --tput-context 0 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_4b.json" > "$OUT/${T}_bench_model_4b.log" 2>&1
t "4b rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_4b.log" | cut -c1-300 | tail -4
