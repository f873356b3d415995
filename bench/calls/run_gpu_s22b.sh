#!/bin/bash
# Twenty-second session, branch fused-rotation-mma: R_K applied inside the CUDA append on tensor cores (rotation
# CTAs, R^T as hi + lo halves), so the paged decode step has no rotation GEMM, cast or copy kernels per layer.
# One GPU, < 10 min, carry [".whl", ".kcache"] (this branch's library prebuilt). Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s22b.sh
# 1. the append / fused-rotation GPU tests; 2. the append alone with R_K fused vs rotate_with_keys + plain append;
# 3. issue 8's Qwen3-8B 128K step ablation (replay ms: full, no append, no decode; the bound); 4. the paged-cache
# GPU tests (generate through the fused path against the references).
set -u
T="$(date +%Y-%m-%d)_s22b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s22
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py -k "rotation or append" \
  > "$OUT/${T}_rot_tests.log" 2>&1
t "rotation / append tests rc=$?"; grep -E "^E  |FAILED|passed|failed|rror" "$OUT/${T}_rot_tests.log" | tail -8 | cut -c1-300
timeout 60 python3 bench/bench_decode.py --pdl 1 --contexts "" --no-flashinfer --no-triton --append-batches 1,32,256 \
  --append-rotation fused,gemm --out "$OUT/${T}_append.json" > "$OUT/${T}_append.log" 2>&1
t "append rc=$?"; grep -E "^append|rror" "$OUT/${T}_append.log" | cut -c1-200
timeout 260 python3 bench/step_ablate.py --model qwen3-8b --context 131072 \
  --out "$OUT/${T}_ablate_8b.json" > "$OUT/${T}_ablate_8b.log" 2>&1
t "ablate 8B rc=$?"; grep -E "oscar |bf16 |OSCAR:|BOUND|bound|rror" "$OUT/${T}_ablate_8b.log" | cut -c1-220
timeout $(( $(left) - 5 )) python3 -m pytest -q -s -p no:cacheprovider tests/cache/test_gpu_paged.py \
  > "$OUT/${T}_cache_tests.log" 2>&1
t "paged tests rc=$?"; grep -E "^FAILED|passed|failed|padded|^E  " "$OUT/${T}_cache_tests.log" | tail -8 | cut -c1-250
