#!/bin/bash
# Twenty-sixth session, for the next device call (branch skip-null-pages, or main after it is merged). One GPU,
# < 10 min, carry [".whl", ".kcache", "bench/alt_int2_paged_main.cu"] (.kcache: this tree's library, 578425ff6d544de1,
# and main's, c26d0e582bbb4e3a = aefc9e0's .cu, for the A/B; the .cu itself is read for the cache key). Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s26a.sh
# Why: the twenty-sixth session's equal-memory ablation (run_gpu_s23a.sh, H100) found the Qwen3-8B step's append
# taking 5.39 of 28.36 ms at batch 59 (~150 us per layer; the append alone is ~20 us at that batch): a graph step's
# fixed page table held 3 pages per row, and the append kernel quantized every padded page (the null block, row 0
# as source, with the K rotation) at every step. The branch skips null pages in the kernel and sizes the table at
# one page per row. 1. the kernel and paged-cache GPU suites on the branch; 2. the append, branch vs main's
# kernel, page view padded 0 / 1 / 3 pages per row (bench/alt_int2_paged_main.cu = `git show
# aefc9e0:src/oscarkv/kernels/cuda/int2_paged.cu`, git-ignored: make it before the call); 3. issue 8's Qwen3-8B
# table (128K batch 1 vs the ideal; equal memory at 32K, target 6x).
set -u
T="$(date +%Y-%m-%d)_s26a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s26
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_kernel_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^E .*rel err|FAILED|passed|failed|rror" "$OUT/${T}_kernel_tests.log" | tail -6 | cut -c1-300
timeout 120 python3 -m pytest -q -s -p no:cacheprovider tests/cache/test_gpu_paged.py > "$OUT/${T}_cache_tests.log" 2>&1
t "paged tests rc=$?"; grep -E "^FAILED|passed|failed|padded|^E  " "$OUT/${T}_cache_tests.log" | tail -8 | cut -c1-250
timeout 120 python3 bench/bench_decode.py --pdl 1 --contexts "" --no-flashinfer --no-triton --append-batches 1,32,59,256 \
  --append-rotation fused --append-pad 0,1,3 --alt-src bench/alt_int2_paged_main.cu \
  --out "$OUT/${T}_append.json" > "$OUT/${T}_append.log" 2>&1
t "append rc=$?"; grep -E "^append.*rotation=fused|rror" "$OUT/${T}_append.log" | cut -c1-160
timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
  --tput-context 32768 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-8b.json" \
  > "$OUT/${T}_bench_model_qwen3-8b.log" 2>&1
t "bench_model 8B rc=$?"; grep -E "oscar_compiled|bf16_compiled|equal|Error|error" "$OUT/${T}_bench_model_qwen3-8b.log" | cut -c1-400
