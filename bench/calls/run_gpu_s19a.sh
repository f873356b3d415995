#!/bin/bash
# Prepared in the eighteenth session (no device lent then), for the next device session. One H200, < 10 min, carry
# [".whl", ".kcache", "bench/alt_signed_offsets.cu"] (the alt source is git-ignored). First, on the CPU machine:
#   git show signed-offsets:src/oscarkv/kernels/cuda/int2_paged.cu > bench/alt_signed_offsets.cu
# and build both libraries into .kcache (cuda_ops.build() with _SRC set to each; the cache is keyed by the source).
#   bash bench/calls/run_gpu_s19a.sh
# One tree, both kernels (OSCARKV_KERNEL_SRC picks the candidate for the whole test suite / model run):
# main's (V offset and zero-point sum folded every 8 tiles) and branch signed-offsets' (odd tokens' V operand
# -(1024 + 4^P (3 - c)), offsets cancelling inside the MMA sums, folds every 32 tiles). GPU kernel tests of both
# (main's: the d 64 G 1 case after the reference's int8-query fix, the new flat-softmax 128K test), the paged-cache
# tests of the candidate, flat-softmax precision and time of both at the shapes where the call is not host-bound,
# and the 128K generate of the candidate against the exact and int8-query references and paged Triton.
# Merge signed-offsets if its tests pass and its precision / time are no worse.
set -u
T="$(date +%Y-%m-%d)_s19a"
source bench/gpu_env.sh
SO=bench/alt_signed_offsets.cu
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_kernel_tests_main.log" 2>&1
t "kernel tests (main) rc=$?"; grep -E "^E .*rel err|FAILED|passed|failed|rror" "$OUT/${T}_kernel_tests_main.log" | tail -6 | cut -c1-300
OSCARKV_KERNEL_SRC=$SO timeout 110 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py \
  > "$OUT/${T}_kernel_tests_so.log" 2>&1
t "kernel tests (signed offsets) rc=$?"; grep -E "^E .*rel err|FAILED|passed|failed|rror" "$OUT/${T}_kernel_tests_so.log" | tail -6 | cut -c1-300
OSCARKV_KERNEL_SRC=$SO timeout 90 python3 -m pytest -q -s -p no:cacheprovider tests/cache/test_gpu_paged.py \
  > "$OUT/${T}_paged_tests_so.log" 2>&1
t "paged tests (signed offsets) rc=$?"; grep -E "passed|failed|FAILED" "$OUT/${T}_paged_tests_so.log" | tail -4 | cut -c1-200
timeout 120 python3 bench/diag_decode_precision.py --test-case --contexts 8192,131072 --score-std 1,3 --splits 1 \
  --alt-src $SO --time-shapes 131072x32,32768x32,65536x8 --out "$OUT/${T}_precision.json" > "$OUT/${T}_precision.log" 2>&1
t "precision rc=$?"; grep -v -i warn "$OUT/${T}_precision.log" | grep -v "ref rounded\|ref int8 query  " | cut -c1-230 | tail -40
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s19
OSCARKV_KERNEL_SRC=$SO timeout $(( 585 - $(date +%s) + T0 )) python3 bench/bench_model.py --models qwen3-8b --contexts "" \
  --modes compiled --tput-context 0 --generate-128k 131072 --generate-refs reference_exact,reference_q8,paged_triton \
  --steps 5 --out "$OUT/${T}_generate_128k_so.json" > "$OUT/${T}_generate_128k_so.log" 2>&1
t "generate 128K (signed offsets) rc=$?"; python3 -c "
import json; d=json.load(open('$OUT/${T}_generate_128k_so.json'))['generate_long']
print({k: round(v, 4) for k, v in d['max_rel_logit_diff'].items()})"
