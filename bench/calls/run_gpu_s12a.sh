#!/bin/bash
# Twelfth session, device call A, < 9 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s12a.sh
# (1) every GPU test of the package again after the eleventh session's two test fixes (the non-finite-query
# test's tolerance, the Triton-on-CPU refusal test's interpreter half); (2) the u8-K kernel's batch-1 fixed
# cost (--diag) and read floor; (3) a split / variant sweep at the four target points (was the split model
# tuned for the fp16-K kernel still right?).
set -u
T="$(date +%Y-%m-%d)_s12a"
source bench/gpu_env.sh
timeout 300 python3 -m pytest -q tests/kernels tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  tests/adversarial > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -8 | cut -c1-300
timeout 100 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --no-flashinfer \
  --contexts 32768 --batches 1 --diag 131072x1:4,32768x1:4 --read-floor 131072x1,32768x1,131072x32 --probe --probe-points 131072x1,32768x1 --probe-variants 4 --probe-modes 1,7 \
  --out "$OUT/${T}_diag.json" > "$OUT/${T}_diag.log" 2>&1
t "diag rc=$?"; grep -vE "^\s*$" "$OUT/${T}_diag.log" | grep -iE "diag|floor|L=|probe" | cut -c1-250 | head -40
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --no-flashinfer \
  --contexts 32768 --batches 1 --sweep --sweep-points 131072x1,32768x1,131072x32 --sweep-variants 0,4,5,6 \
  --sweep-scales 0.5,0.75,1.0,1.5 --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -iE "sweep|best|^L=" "$OUT/${T}_sweep.log" | cut -c1-250 | head -60
