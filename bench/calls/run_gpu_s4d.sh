#!/bin/bash
# Fourth session, device call D (issues 7, 8), < 3 min on one H200, from the repo root, carry [".whl", ".kcache"]
# (.kcache: the kernel library prebuilt on the CPU machine with the same nvcc 13.0, OSCARKV_KERNEL_CACHE):
#   bash bench/calls/run_gpu_s4d.sh [tput]
# 1. GPU kernel tests, quick subset (final .cu: pair variants removed).
# 2. GPU tests of the transformers paged path with the new defaults (PDL on): paged == reference, graph
#    capture, padded batch, sampling, NaN (device budget left for no more).
# 3. with argument "tput": bench_model Qwen3-4B BF16 at equal KV memory with fused projections.
set -u
T="$(date +%Y-%m-%d)_s4d"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s4d
timeout 40 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py \
  -k "randomized or many_splits or graph or fp16" > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log"
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py >> "$OUT/${T}_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -6
if [ "${1:-}" = "tput" ]; then
  timeout 140 python3 bench/bench_model.py --models qwen3-4b --contexts "" --modes compiled --tput-context 32768 \
    --tput-methods bf16_compiled --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_4b_tput_bf16_fused.json" \
    > "$OUT/${T}_bench_model_4b_tput_bf16_fused.log" 2>&1
  t "4b bf16 equal-memory fused rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_4b_tput_bf16_fused.log" | cut -c1-420 | tail -4
fi
