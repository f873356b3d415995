#!/bin/bash
# Prepared in the thirty-ninth session for the next one (not yet run), on main with merge slices. Any card, one GPU,
# < 10 min, carry [".whl", ".kcache"] (the tree's library prebuilt into .kcache on the CPU machine: docs/KERNELS.md,
# "Build"):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s40.sh
# 1. On an H200 first: the thirty-eighth session's call d (the H200 has not run the ring at phase 0): issue 7's 128K
#    b1 / b32 and 32K b1 rows with every peer under the H200's variant rule.
# 2. One BF16-tier split instead of two at batch 1 (issue 7: 128K b1 needs ~1 us for 6x BF16 on the H100, 32K b1
#    ~1.3 us for 4x). The thirty-first session measured 1+31 0.2-1.0 us faster than 2+31 at 128K b1 on variant 4,
#    and slower elsewhere; since then 128K b1 runs variant 7 and 8 merge slices. Three alternating rounds, explicit
#    split counts (the plan's first in each group): 128K / 96K b1 on variant 7 (2+31, 1+31, 1+32), 64K / 32K b1 on
#    variant 4 (2+14, 1+14, 1+15). And 33 splits at 64K / 32K b1 (2+31, 1+32; the plan's rule then merges with 8
#    slices): x0.5-x2.0 of the plan's INT2 count at 32K b1 measured 15.1-19.6 us in the thirtieth session (plan 15.4),
#    when one CTA merged every split; with slices a 33-way merge lost its second round trip (s39b's 128K trace).
# 3. Issue 7's 128K and 32K batch-1 rows with the best one-split alternative beside the plan's (column ours_alt).
set -u
T="$(date +%Y-%m-%d)_s40"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s40
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
if echo "$CARD" | grep -q H200; then
  issue7_rows 131072 1,32 128k_h200
  issue7_rows 32768 1 32k_h200
fi
S7=131072x1=2+31,131072x1=1+31,131072x1=1+32,98304x1=2+31,98304x1=1+31,98304x1=1+32,65536x1=2+31,32768x1=2+31,32768x1=1+32
S4=65536x1=2+14,65536x1=1+14,65536x1=1+15,32768x1=2+14,32768x1=1+14,32768x1=1+15,32768x1=2+31
for r in 1 2 3; do
  variant_sweep "" 7 v7_r$r 120 "--sweep-splits $S7"
  variant_sweep "" 4 v4_r$r 120 "--sweep-splits $S4"
done
[ $(left) -ge 100 ] && issue7_rows 131072 1 128k "--alt-splits 131072x1=1+31"
[ $(left) -ge 40 ] && issue7_rows 32768 1 32k "--alt-splits 32768x1=1+15"
