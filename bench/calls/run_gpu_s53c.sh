#!/bin/bash
# Fifty-third session, H100 or H200 (carry [".whl", ".kcache"]; .kcache holds this tree's library and trace build, and
# f3f8510's (the first lean end, s53b) library and source as .kcache/lean1_f3f8510.cu):
#   BUDGET=<s> OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s53c.sh
# The second lean end (the CTA combine unrolled over float4 reads of the warps' max / sum, MUFU reciprocal and log;
# the merge's LSE loads issued before the partial outputs): the GPU tests (kernels, paged cache), B = f3f8510 against
# C = this tree alternating at the batch-1 points, issue 7's rows with every peer and the bare read through this tree,
# then its trace. One tarball comes back.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s53c}"
source bench/gpu_env.sh
start_call
B_SRC=$PWD/.kcache/lean1_f3f8510.cu
kernel_tests 160
[ $(left) -gt 300 ] && { timeout 90 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py \
  > "$OUT/${T}_tests_paged.log" 2>&1; t "paged tests rc=$?"; tail -1 "$OUT/${T}_tests_paged.log"; }
for r in 1 2; do
  for who in B C; do
    [ $(left) -gt 170 ] || break
    if [ $who = B ]; then export OSCARKV_KERNEL_SRC=$B_SRC; else unset OSCARKV_KERNEL_SRC; fi
    variant_sweep 32768x1,131072x1 4,7 ab_b1_${who}${r} 160
    [ $r = 1 ] && variant_sweep 131072x32 11 ab_b32_${who}${r} 150
  done
done
unset OSCARKV_KERNEL_SRC
[ $(left) -gt 110 ] && issue7_rows 131072,32768 32,1 key "--read-floor 131072x1,32768x1"
[ $(left) -gt 40 ] && timeout $(( $(left) - 15 )) python3 bench/trace_decode.py --points 32768x1,131072x1 \
  --modes b2b --out "$OUT/${T}_trace.json" > "$OUT/${T}_trace.log" 2>&1
t "trace rc=$?"; grep -E "^trace|SM loop" "$OUT/${T}_trace.log" | cut -c1-400
t done
pack_out
