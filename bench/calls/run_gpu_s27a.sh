#!/bin/bash
# Twenty-seventh session: the one-call version of the twenty-sixth session's run_gpu_s26a.sh (removed: never run) + s26b.sh, for when the device budget leaves one
# call (branch skip-null-pages, or main after it is merged). One GPU, < 10 min, carry [".whl", ".kcache"]:
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s27a.sh
# 1. the kernel and paged-cache GPU suites (the padded-page test among them); 2. the append with the page view
# padded 0 / 3 pages per row (this tree's kernel only); 3. issue 8's throughput at equal KV memory (40 GiB, 32K)
# for Qwen3-8B and Qwen3-4B, BF16 with cuDNN SDPA only (the faster BF16 peer in every H100 run so far: 8B 19.19 vs
# FlashInfer 19.56 ms, 4B 16.90 vs 17.20), to fit both models in one call; 4. with the time left, the 8B at 128K
# batch 1 (both BF16 peers).
set -u
T="$(date +%Y-%m-%d)_s27a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s27
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_kernel_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "FAILED|passed|failed|rror" "$OUT/${T}_kernel_tests.log" | tail -6 | cut -c1-300
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py > "$OUT/${T}_cache_tests.log" 2>&1
t "paged tests rc=$?"; grep -E "^FAILED|passed|failed|^E  " "$OUT/${T}_cache_tests.log" | tail -8 | cut -c1-250
timeout 60 python3 bench/bench_decode.py --pdl 1 --contexts "" --no-flashinfer --no-triton --append-batches 1,59 \
  --append-rotation fused --append-pad 0,3 --out "$OUT/${T}_append.json" > "$OUT/${T}_append.log" 2>&1
t "append rc=$?"; grep -E "^append.*rotation=fused|rror" "$OUT/${T}_append.log" | cut -c1-160
for m in qwen3-8b qwen3-4b; do
  timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models $m --contexts "" --modes compiled \
    --tput-context 32768 --fuse-projections --steps 20 --compiled-bf16-backends CUDNN_ATTENTION \
    --out "$OUT/${T}_eq_$m.json" > "$OUT/${T}_eq_$m.log" 2>&1
  t "equal memory $m rc=$?"; grep -E "equal|Error|error" "$OUT/${T}_eq_$m.log" | cut -c1-330
done
timeout $(( $(left) - 3 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
  --tput-context 0 --fuse-projections --steps 20 --out "$OUT/${T}_b1_qwen3-8b.json" > "$OUT/${T}_b1_qwen3-8b.log" 2>&1
t "128K batch 1 8B rc=$?"; grep -E "oscar_compiled|bf16_compiled|Error|error" "$OUT/${T}_b1_qwen3-8b.log" | cut -c1-400
