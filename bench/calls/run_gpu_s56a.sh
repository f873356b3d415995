#!/bin/bash
# Written in the fifty-sixth session (no device lent in it): run_gpu_s54d.sh + run_gpu_s55a.sh + run_gpu_s55b.sh's
# main questions in ONE call, for a session whose device time would not hold all three. H100. Before the call apply
# both patches, so that the tree's kernel is C (check: `cmp src/oscarkv/kernels/cuda/int2_paged.cu .kcache/s55_hp.cu`):
#   git apply bench/results/2026-12-07_s54d_prep_q_div.patch bench/results/2026-12-07_s55_hp_vec.patch
# carry [".whl", ".kcache/41f21771678a3739", ".kcache/9868511cddb495f9", ".kcache/s54d_fix.cu", ".kcache/s54d_tree.cu"]
# (B's and C's libraries, prebuilt on the CPU machine and keyed by the source's text; A's, three libraries being over
# the 64 MiB carry limit, is built here first, about a minute, while C's kernel tests run):
#   BUDGET=570 OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s56a.sh
#   A = main's kernel (.kcache/s54d_tree.cu: a8456fc's text; main's lse_of refactor has the same SASS)
#   B = A + the prep_q division fix (bench/results/2026-12-07_s54d_prep_q_div.patch)           [run_gpu_s54d.sh]
#   C = B + the BF16 tier in 16-byte loads with L1 prefetches (..._s55_hp_vec.patch)             [run_gpu_s55a.sh]
# Order: C's GPU kernel tests (the winner W is C if they pass, else B); one round of A / B / C at the split counts
# the plan runs today (32K b1 2 + 14, 128K b1 2 + 31; variants 4 and 7) and C also at 1 + 15 / 1 + 32; issue 7's rows
# with every peer on W (C: with the BF16-tier rule at 3 tiles per warp, one split at batch 1, run_gpu_s55b.sh's
# question; the INT2 count follows); the paged-cache + vLLM-shaped GPU tests and the log8 tests on W; a second A / B /
# C round if time is left. Keep B if it beats A and its tests pass (W = B, or C's tests passing cover B's code too);
# keep C (with the rule) if 1 + 15 / 1 + 32 beat B's 2 + 14 / 2 + 31 and the rows confirm it.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s56a}"
source bench/gpu_env.sh
start_call
A=$PWD/.kcache/s54d_tree.cu
B=$PWD/.kcache/s54d_fix.cu
C=$PWD/src/oscarkv/kernels/cuda/int2_paged.cu
(export OSCARKV_KERNEL_SRC=$A; python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())" \
  > "$OUT/${T}_build_A.log" 2>&1; t "library A rc=$?") &
BUILD=$!
kernel_tests 150
W=B; tail -1 "$OUT/${T}_tests.log" | grep -E " passed" | grep -vqE "failed|error" && W=C  # C only if its tests ran whole and passed
[ $W = B ] && mv "$OUT/${T}_tests.log" "$OUT/${T}_tests_C_failed.log"
t "W = $W"
wait $BUILD
OLD="--sweep-splits 32768x1=2+14,131072x1=2+31"
NEW="--sweep-splits 32768x1=2+14,32768x1=1+15,131072x1=2+31,131072x1=1+32"
abc() {  # round $1: A and B at today's split counts, C at both (the points are --sweep-splits')
  (export OSCARKV_KERNEL_SRC=$A; variant_sweep 32768x1 4,7 "abc_A$1" 20 "$OLD")
  (export OSCARKV_KERNEL_SRC=$B; variant_sweep 32768x1 4,7 "abc_B$1" 20 "$OLD")
  (export OSCARKV_KERNEL_SRC=$C; variant_sweep 32768x1 4,7 "abc_C$1" 20 "$NEW")
}
[ $(left) -gt 120 ] && abc 1  # (first: the A / B / C question, before the rows, should the call be short)
src=$C; hpw="--hp-tiles-per-warp 3"
[ $W = B ] && src=$B && hpw=""
export OSCARKV_KERNEL_SRC=$src
[ $W = B ] && [ $(left) -gt 200 ] && kernel_tests 150  # B's own tests when C's failed
[ $(left) -gt 170 ] && issue7_rows 131072,32768 32,1 "key_$W" "--also-log8 --read-floor 131072x1,32768x1 $hpw"
[ $(left) -gt 90 ] && paged_tests $(( $(left) - 40 )) "_$W"
[ $(left) -gt 45 ] && log8_tests $(( $(left) - 15 > 60 ? 60 : $(left) - 15 ))
unset OSCARKV_KERNEL_SRC
[ $(left) -gt 110 ] && abc 2
t done
pack_out
