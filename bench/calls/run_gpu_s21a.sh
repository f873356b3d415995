#!/bin/bash
# Branch candidate2 (twenty-first session) = main + signed-offsets + paired-tiles (candidate without the fused R_K
# append, which measured 0.859 ms per 8B step against 0.136 for the plain append, 2026-12-05 cand2). One H200,
# < 10 min, carry [".whl", ".kcache", "bench/alt_int2_paged_main.cu"] (.kcache: this branch's kernel, prebuilt).
# The variant sweep at more batch sizes (the default rule: 4 below 128 pairs, else 10), issue 8's Qwen3-8B model
# table (128K batch 1 and equal memory at 32K), the kernel tests, the paged-cache GPU tests (the padded test's
# two references), the vLLM layer tests, then the precision against main's kernel with the remaining time.
set -u
T="$(date +%Y-%m-%d)_s21a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s21
timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
  --sweep --sweep-points 131072x1,32768x1,131072x8,65536x8,131072x16,32768x16,131072x32,32768x32 \
  --sweep-variants 4,11,0,10 --sweep-scales 1.0 --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_sweep.log" | cut -c1-160
timeout $(( $(left) - 20 < 330 ? $(left) - 20 : 330 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
  --tput-context 32768 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-8b.json" \
  > "$OUT/${T}_bench_model_qwen3-8b.log" 2>&1
t "bench_model rc=$?"; grep -E "oscar_compiled|bf16_compiled|equal|Error|error" "$OUT/${T}_bench_model_qwen3-8b.log" | cut -c1-260
timeout $(( $(left) - 60 < 120 ? $(left) - 60 : 120 )) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_kernel_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^E .*rel err|FAILED|passed|failed|rror" "$OUT/${T}_kernel_tests.log" | tail -6 | cut -c1-300
timeout $(( $(left) - 40 )) python3 -m pytest -q -s -p no:cacheprovider tests/cache/test_gpu_paged.py \
  -k "padded or graph_paged or beam or reset" > "$OUT/${T}_cache_tests.log" 2>&1
t "paged tests rc=$?"; grep -E "^FAILED|passed|failed|padded" "$OUT/${T}_cache_tests.log" | tail -8 | cut -c1-250
timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider tests/vllm/test_gpu_vllm_shapes.py > "$OUT/${T}_vllm_tests.log" 2>&1
t "vllm shapes tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_vllm_tests.log" | tail -4 | cut -c1-250
ALT=""; [ -f bench/alt_int2_paged_main.cu ] && ALT="--alt-src bench/alt_int2_paged_main.cu"
timeout $(left) python3 bench/diag_decode_precision.py --test-case --contexts 8192,131072 --score-std 1,3 \
  --splits 1 $ALT --out "$OUT/${T}_precision.json" > "$OUT/${T}_precision.log" 2>&1
t "precision rc=$?"; grep -v -i warn "$OUT/${T}_precision.log" | grep -v "ref rounded\|ref int8 query  " | cut -c1-230 | tail -24
