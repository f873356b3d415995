#!/bin/bash
# Ran in the thirty-fifth session as `OSCARKV_COMMIT=cbb5c5b bash bench/calls/run_gpu_s35.sh` on an H200 (stealing v2
# 25-30% slower than steal 0: not taken; BENCHMARKS.md, thirty-fifth session).
# Prepared in the thirty-fourth session for the next one. Any card, one GPU, < 10 min, carry
# [".whl", ".kcache"]. Prebuilt on the CPU machine (.kcache): stealing d2b1a6cc... and its trace build 9c9159b0...
# (both from main's int2_paged.cu of 5ea82ae..dbe154c with the patch below applied; a kernel change on main voids them:
# rebuild as in run_gpu_s32b.sh's header, with the patch applied to the tree, then revert).
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s35.sh
# Work stealing, second form (bench/results/2026-12-05_s33_steal_per_warp.patch, applied to this copy of the tree
# here; main is untouched): as the first (s33b: one counter per (sequence, KV head), claims serialized, 25-66%
# slower), but warp w of every split claims from counter w of the (sequence, KV head), the tiles of its own
# interleave: ~31 warps per counter instead of ~250, the claims' lead unchanged (two tiles). Why still: the SMs' unequal
# pace is the 128K batch-1 lever left (s33: sharing the work at the SMs' rates would end <= 3.0 us sooner); the two
# levers of the thirty-fourth session (merge prefetch, mixed BF16-tier CTAs) gave <= 0.4 us.
# 1. the CUDA kernel tests with the patch; 2. steal 0 / 85 / 70 alternating, three rounds, 128K / 32K batch 1;
# 3. the trace with steal 85 (SM balance and merge). Keep stealing only if it beats steal 0 (the default only after a
# second sample).
set -u
T="$(date +%Y-%m-%d)_s35"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
patch -s -p1 < bench/results/2026-12-05_s33_steal_per_warp.patch || { echo "the patch does not apply"; exit 2; }
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "GPU kernel tests (steal per warp) rc=$?"; tail -1 "$OUT/${T}_tests.log" | cut -c1-200
grep -E "^FAILED|^ERROR" "$OUT/${T}_tests.log" | head -8 | cut -c1-300
mkdir -p /tmp/ab
for r in 1 2 3; do
  for s in 0 85 70; do
    [ $(left) -lt 90 ] && break
    timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton \
      --no-append --steal $s --sweep --sweep-variants 4 --sweep-scales 1.0 --sweep-points 131072x1,32768x1 \
      > "/tmp/ab/${T}_steal${s}_$r.log" 2>&1
    echo "steal $s round $r rc=$?: $(grep -E '^sweep' "/tmp/ab/${T}_steal${s}_$r.log" | sed 's/sweep L=//' | cut -c1-60 | tr '\n' ';')"
  done
done | tee "$OUT/${T}_ab.txt"
t "A/B done"
(cd /tmp/ab && tar czf "$OUT/${T}_ab_logs.tgz" .)
[ $(left) -gt 60 ] && timeout $(( $(left) - 5 )) python3 bench/trace_decode.py --points 131072x1,32768x1 \
  --modes no_pdl,b2b --steal 85 --out "$OUT/${T}_trace85.json" > "$OUT/${T}_trace85.log" 2>&1
t "trace steal 85 rc=$?"; grep -E "^trace|SM loop|rror" "$OUT/${T}_trace85.log" | cut -c1-600
