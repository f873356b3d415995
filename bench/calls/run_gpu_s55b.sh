#!/bin/bash
# Written in the fifty-sixth session (no device lent in it), for the call after run_gpu_s55a.sh, and only if C (the
# s55 BF16 tier) won there at 1 + 15 / 1 + 32. H100; before the call apply both patches to the tree (its kernel is then
# .kcache/s55_hp.cu's text, whose library 9868511cddb495f9 is in .kcache; check with
# `cmp src/oscarkv/kernels/cuda/int2_paged.cu .kcache/s55_hp.cu`):
#   git apply bench/results/2026-12-07_s54d_prep_q_div.patch bench/results/2026-12-07_s55_hp_vec.patch
# carry [".whl", ".kcache/41f21771678a3739", ".kcache/9868511cddb495f9", ".kcache/s54d_fix.cu"] (B's library and source,
# C's library = the tree's); about 400 s, so that it fits beside s54d and s55a in one session's device time:
#   BUDGET=400 OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s55b.sh
# The plan's rule for the BF16-tier split count (CudaDecodeConfig.hp_tiles_per_warp, 2 tiles per warp once the INT2
# tier is past 1024 tiles) against 3 per warp, which gives the tier one split at batch 1 (21 tiles on 8 warps) and the
# grid's other CTA slot to the INT2 tier (32K 1 + 15, 128K 1 + 32): through the plan, so the INT2 count follows, at
# 24K / 32K / 64K / 128K batch 1 (INT2 tiers past 1024 tiles) on variants 4 and 7; B = s54d's kernel at 2 per warp (main after s54d), then C at
# 2 and at 3. Then issue 7's rows with every peer on C at 3 per warp (at batch 32 the tier has one split either way).
# If 3 wins from some INT2 length on: write that into _choose_hp_splits (cuda_ops.py) and its docstring.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s55b}"
source bench/gpu_env.sh
start_call
B=$PWD/.kcache/s54d_fix.cu
PTS=24576x1,32768x1,65536x1,131072x1
sweeps() {  # round $1: B at 2 per warp, C at 2, C at 3, each one process (~30 s)
  local cfg who hpw src
  for cfg in B:2 C:2 C:3; do
    who=${cfg%:*}; hpw=${cfg#*:}
    src=$PWD/src/oscarkv/kernels/cuda/int2_paged.cu; [ $who = B ] && src=$B
    [ $(left) -gt 60 ] && (export OSCARKV_KERNEL_SRC=$src; variant_sweep $PTS 4,7 "hpw_${who}${hpw}_$1" 20 \
      "--hp-tiles-per-warp $hpw")
  done
}
sweeps 1
[ $(left) -gt 170 ] && issue7_rows 131072,32768 32,1 hpw3 "--also-log8 --read-floor 131072x1,32768x1 --hp-tiles-per-warp 3"
sweeps 2
t done
pack_out
