#!/bin/bash
# Prepared in the thirty-eighth session for the next one (not yet run), on branch s39-epilogue. Any card, one GPU,
# < 10 min, carry [".whl", ".kcache"], with the four libraries below prebuilt into .kcache on the CPU machine (the
# cache is keyed by the source text: run this script's alt_src for (0, 0), (1, 0) and (0, 1) there and build each
# with OSCARKV_KERNEL_SRC=/tmp/oscar_alt/e<E>m<M>.cu, and the tree's own: docs/KERNELS.md, "Build"):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s39.sh
# The branch shortens the end of a split-K call (issue 7: 128K batch 1 needs ~1.3 us for 6x BF16 on the H100) with two
# changes, each behind a macro of the .cu (on by default): OSCAR_EPI_WEIGHTS_ONCE, each CTA's combine of its warps'
# partials computes the warps' weights once per head instead of once per output element (ptxas: 4 B of spill stores
# in the single-tile head_dim-128 variants, none before); OSCAR_MERGE_LSE_FIRST, the last CTA's merge loads its LSEs
# before its partial outputs (they came back behind up to ~49 KB of them; the paired variants' spill 76 -> 108 B).
# 1. the kernel GPU tests with the branch's kernel (both changes);
# 2. the four builds (e0m0 = main's code, e1m0, e0m1, the tree = e1m1), alternating, three rounds, at the plan's
#    variants and splits: 128K b1 / 96K b1 (7), 32K b1 / 64K b1 (4), 128K b32 (11);
# 3. issue 7's 128K and 32K batch-1 rows with every peer on the branch.
set -u
T="$(date +%Y-%m-%d)_s39"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s39
# this tree's kernel with OSCAR_EPI_WEIGHTS_ONCE = $1 and OSCAR_MERGE_LSE_FIRST = $2, as /tmp/oscar_alt/e$1m$2.cu
alt_src() {
  mkdir -p /tmp/oscar_alt
  printf '#define OSCAR_EPI_WEIGHTS_ONCE %s\n#define OSCAR_MERGE_LSE_FIRST %s\n' "$1" "$2" |
    cat - src/oscarkv/kernels/cuda/int2_paged.cu > "/tmp/oscar_alt/e$1m$2.cu"
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
kernel_tests 150
P=131072x1,32768x1,98304x1,65536x1,131072x32
for em in "0 0" "1 0" "0 1"; do alt_src $em; done
for r in 1 2 3; do
  for em in 0m0 1m0 0m1; do OSCARKV_KERNEL_SRC=/tmp/oscar_alt/e$em.cu variant_sweep $P 7,4,11 e${em}_r$r 140; done
  variant_sweep $P 7,4,11 e1m1_r$r 140
done
[ $(left) -ge 100 ] && issue7_rows 131072 1 128k
[ $(left) -ge 40 ] && issue7_rows 32768 1 32k
