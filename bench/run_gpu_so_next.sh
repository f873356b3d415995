#!/bin/bash
# Branch signed-offsets (seventeenth session), not yet run. One H200, < 10 min, carry [".whl", ".kcache",
# "bench/alt_int2_paged_main.cu"]. First, on
# the CPU machine: `git show main:src/oscarkv/kernels/cuda/int2_paged.cu > bench/alt_int2_paged_main.cu` and build
# both libraries into .kcache (cuda_ops.build() with _SRC set to each; the cache is keyed by the source).
#   bash bench/run_gpu_so_next.sh
# The kernel with even / odd V offsets (odd tokens' A operand -(1024 + 4^P (3 - c)): the offsets cancel in the
# MMA sums) folded every 32 tiles, against main's (one offset, folds every 8 tiles): the GPU tests, the precision
# on a flat 128K softmax and the kernel-test case, the time at the shapes where the call is not host-bound, and
# the 128K generate. Merge into main if the tests pass and precision / time are no worse.
set -u
T="$(date +%Y-%m-%d)_sonext"
source bench/gpu_env.sh
timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py \
  > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror|flat softmax" "$OUT/${T}_tests.log" | tail -8 | cut -c1-300
ALT=""; [ -f bench/alt_int2_paged_main.cu ] && ALT="--alt-src bench/alt_int2_paged_main.cu"
timeout 150 python3 bench/diag_decode_precision.py --test-case --contexts 8192,131072 --score-std 1,3 --splits 1 $ALT \
  --time-shapes 131072x32,32768x32,65536x8 --out "$OUT/${T}_precision.json" > "$OUT/${T}_precision.log" 2>&1
t "precision rc=$?"; grep -v -i warn "$OUT/${T}_precision.log" | grep -v "ref rounded\|ref int8 query  " | cut -c1-230 | tail -40
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_sonext
timeout $(( 585 - $(date +%s) + T0 )) python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --generate-refs reference_exact,paged_triton --steps 5 \
  --out "$OUT/${T}_generate_128k.json" > "$OUT/${T}_generate_128k.log" 2>&1
t "generate 128K rc=$?"; python3 -c "
import json; d=json.load(open('$OUT/${T}_generate_128k.json'))['generate_long']
print({k: round(v, 4) for k, v in d['max_rel_logit_diff'].items()})"
