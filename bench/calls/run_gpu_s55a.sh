#!/bin/bash
# Written in the fifty-fifth session (no device time left in it), for the call after run_gpu_s54d.sh. H100; carry
# [".whl", ".kcache/41f21771678a3739", ".kcache/9868511cddb495f9", ".kcache/s54d_fix.cu", ".kcache/s55_hp.cu"] and
# the tree (64 MiB in all with it) with the s54d patch applied (`git apply bench/results/2026-12-07_s54d_prep_q_div.patch`,
# as run_gpu_s54d.sh leaves it: then the tree's library is B's; otherwise start_call builds the tree's there,
# ~1 min). The libraries (built on the CPU machine, keyed by the source's text) are those of:
#   .kcache/s54d_fix.cu = main's kernel + bench/results/2026-12-07_s54d_prep_q_div.patch            (B)
#   .kcache/s55_hp.cu   = the same + bench/results/2026-12-07_s55_hp_vec.patch's kernel part           (C)
# (rebuild: for f in s54d_fix s55_hp; do OSCARKV_KERNEL_SRC=$PWD/.kcache/$f.cu OSCARKV_KERNEL_CACHE=$PWD/.kcache \
#    python -c "from oscarkv.kernels import cuda_ops; cuda_ops.build()"; done)
#   BUDGET=560 OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s55a.sh
# C: the BF16 tier's tile in 16-byte loads (a lane's K and V elements contiguous: head_dim permuted inside both MMAs)
# and L1 prefetches of the tile's V rows and the next tile's K and V rows, so a tile costs one memory round trip
# instead of two or three. The point: one BF16-tier split instead of two, i.e. one INT2 split more in the same grid
# (32K b1 1 + 15 instead of 2 + 14: 136 INT2 tiles per CTA instead of 146; 128K b1 1 + 32 instead of 2 + 31), which
# lost so far because the lone BF16-tier CTA finished last (fortieth session: 17.4 vs 15.0 us at 32K). Order: the
# GPU kernel tests on C first (its correctness), then B vs C at both split counts, alternating, two rounds, then the
# fixed-cost diagnosis of both (its no_int2 line: the BF16 tier alone), then the paged-cache and vLLM-shaped tests on C.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s55a}"
source bench/gpu_env.sh
start_call
B=$PWD/.kcache/s54d_fix.cu
C=$PWD/.kcache/s55_hp.cu
(export OSCARKV_KERNEL_SRC=$C; kernel_tests 150)
SPL="--sweep-splits 32768x1=2+14,32768x1=1+15,131072x1=2+31,131072x1=1+32"
# (src_ab names its two sources A and B: hp_A<r>.log is B here, hp_B<r>.log is C)
src_ab 32768x1 4,7 hp 200 "$B" "$C" 2 "$SPL"
for who in B C; do
  src=$B; [ $who = C ] && src=$C
  [ $(left) -gt 150 ] && (export OSCARKV_KERNEL_SRC=$src; diag_points "32768x1:4,131072x1:7" $who 120)
done
[ $(left) -gt 60 ] && (export OSCARKV_KERNEL_SRC=$C; paged_tests $(( $(left) - 20 )) _C)
t done
pack_out
