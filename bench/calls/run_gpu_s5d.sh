#!/bin/bash
# Fifth session, device call D (issues 7, 8), < 10 min on one H200, from the repo root, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s5d.sh
# 1. GPU tests: kernels (early_reads: pre-wait reads, append -> early decode each step), paged transformers
#    path (its decode plan now uses early_reads), compiled step, NaN.
# 2. Fixed cost with PDL, early_reads off / on, at 128K / 32K batch 1, and batch 32.
# 3. Qwen3-8B 128K: model.generate on the paged cache vs the reference teacher-forced, bf16 and fp32 attention.
# 4. Qwen3-4B 128K batch 1 (paged decode plan with early_reads).
set -u
T="$(date +%Y-%m-%d)_s5d"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s5d
timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|Error" "$OUT/${T}_tests.log" | tail -4
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  tests/adversarial/test_nan_propagates.py >> "$OUT/${T}_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -4
for e in 0 1; do
  timeout 80 python3 bench/bench_decode.py --pdl 1 --early-reads $e --no-flashinfer --no-triton --no-append \
    --contexts 4096,32768,131072 --batches 1,32 --diag 131072x1:4,32768x1:4 \
    --out "$OUT/${T}_pdl_early$e.json" > "$OUT/${T}_pdl_early$e.log" 2>&1
  t "pdl early=$e rc=$?"; grep -E "^diag|^L=" "$OUT/${T}_pdl_early$e.log" | cut -c1-560
done
timeout 200 python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --steps 5 --out "$OUT/${T}_generate_8b_128k.json" > "$OUT/${T}_generate_8b_128k.log" 2>&1
t "generate rc=$?"; grep -E "generate at|Error" "$OUT/${T}_generate_8b_128k.log" | cut -c1-1800
timeout 130 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled --tput-context 0 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_4b.json" > "$OUT/${T}_bench_model_4b.log" 2>&1
t "4b rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_4b.log" | cut -c1-300 | tail -3
