#!/bin/bash
# Fifty-third session, H100 or H200 (carry [".whl", ".kcache"]; .kcache holds this tree's library, its trace build,
# main's library and main's source as .kcache/main_621f49a.cu):
#   BUDGET=<s> OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s53b.sh
# The lean end of the decode call (one-pass CTA combine, the merge's weights from the LSEs in one step, no integer
# division, rolled loops: the end's code runs once per CTA and is fetched from L2, s53a): the GPU kernel tests, then
# main (A) against this tree (B) alternating, two rounds, at the batch-1 points (variants 4 and 7) and 128K batch 32
# (variant 11), then this tree's trace at 32K / 128K batch 1. One tarball comes back.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s53b}"
source bench/gpu_env.sh
start_call
MAIN_SRC=$PWD/.kcache/main_621f49a.cu
kernel_tests 200
for r in 1 2; do
  for who in A B; do
    [ $(left) -gt 140 ] || break
    if [ $who = A ]; then export OSCARKV_KERNEL_SRC=$MAIN_SRC; else unset OSCARKV_KERNEL_SRC; fi
    variant_sweep 32768x1,131072x1 4,7 ab_b1_${who}${r} 120
    variant_sweep 131072x32 11 ab_b32_${who}${r} 110
  done
done
unset OSCARKV_KERNEL_SRC
[ $(left) -gt 60 ] && timeout $(( $(left) - 20 )) python3 bench/trace_decode.py --points 32768x1,131072x1 \
  --modes b2b,no_pdl --out "$OUT/${T}_trace.json" > "$OUT/${T}_trace.log" 2>&1
t "trace rc=$?"; grep -E "^trace|SM loop" "$OUT/${T}_trace.log" | cut -c1-400
[ $(left) -gt 40 ] && timeout $(( $(left) - 10 )) python3 bench/icache_probe.py --sizes 1536,2048,2560,3072 \
  --json "$OUT/${T}_icache.json" > "$OUT/${T}_icache.log" 2>&1
t "icache rc=$?"; cat "$OUT/${T}_icache.log"
t done
pack_out
