#!/bin/bash
# Fifty-fourth session, second call (H100; carry [".whl", ".kcache"], the library of this tree built on the CPU machine):
#   BUDGET=<s> OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s54b.sh
# The warmer variants 15 / 16 (= 4 / 7 with a ninth warp that runs the end of the call as a dry run while the others
# stream, so that the end's code is in the SM's instruction cache when they reach it): their GPU tests, then the
# A/B against 4 / 7 in the same processes (the plan's splits at 32K and 128K batch 1), with the warmer at once and
# after a sleep (--warm-ns), alternating; then the trace of 32K batch 1 on 4 and 15.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s54b}"
source bench/gpu_env.sh
start_call
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_build.py \
  tests/kernels/test_cuda_kernels.py -k "build or warmer or (gqa_and_head_dims and 128 and (15 or 16))" -rs \
  > "$OUT/${T}_tests.log" 2>&1
t "warmer tests rc=$?"; tail -1 "$OUT/${T}_tests.log"; grep -E "^FAILED|Error" "$OUT/${T}_tests.log" | head -8
for r in 1 2; do
  for w in 0 5000 15000; do
    [ $(left) -gt 60 ] && variant_sweep 32768x1,131072x1 4,15,7,16 ab_w${w}_r$r 40 "--warm-ns $w"
  done
done
# the trace build (prebuilt into .kcache) of 32K batch 1 on variant 4 and on its warmer twin 15: where the end's time goes
for v in 4 15; do
  [ $(left) -gt 60 ] || break
  timeout 60 python3 bench/trace_decode.py --points 32768x1 --modes b2b --variant $v --out "$OUT/${T}_trace_v$v.json" \
    > "$OUT/${T}_trace_v$v.log" 2>&1
  t "trace v$v rc=$?"; grep -E "^trace|SM loop|rror" "$OUT/${T}_trace_v$v.log" | cut -c1-420
done
t done
pack_out
