#!/bin/bash
# Prepared in the thirty-third session for the next one (not run yet). Any card, one GPU, < 10 min, carry
# [".whl", ".kcache", ".alt"]. Prebuilt on the CPU machine (.kcache): main 254acd31..., its trace build fb918a97...,
# the merge prefetch 429e6a6d... (trace deaa5051...), stealing d2b1a6cc... (trace 9c9159b0...). To regenerate:
# mkdir -p .alt && patch -s -o .alt/int2_paged_merge.cu src/oscarkv/kernels/cuda/int2_paged.cu \
#   < bench/results/2026-12-05_s33_merge_prefetch.patch, then run_gpu_s32b.sh's header's build commands for each
# source (stealing: apply its patch to the tree, build, revert).
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s34.sh
# Work stealing, second form (bench/results/2026-12-05_s33_steal_per_warp.patch, applied to this copy of the tree
# here; main is untouched): as the first (s33b: one counter per (sequence, KV head), claims serialized, 25-66%
# slower), but warp w of every split claims from counter w of the (sequence, KV head), the tiles of its own
# interleave: ~31 warps per counter instead of ~250, the claims' lead unchanged (two tiles).
# 1. the CUDA kernel tests with the patch; 2. steal 0 / 85 / 70 alternating, three rounds, 128K / 32K batch 1;
# 3. the trace with steal 85 (SM balance and merge).
# Before the stealing patch is applied (main's tree, kernel library 254acd31... prebuilt): the merge prefetch
# (bench/results/2026-12-05_s33_merge_prefetch.patch as .alt/int2_paged_merge.cu, carry ".alt" too): at 128K batch 1
# the merging CTA's splits past its 12 register loads per thread (33 splits, two groups: 5 + 4 of them) go to shared
# memory by cp.async beside the LSE loads instead of a second L2 round trip after the weights (the traces put the
# output stage, event 6 -> 7, at 1.2 us at 128K against 0.6 at 32K), and indexes the partials in 32 bits (fewer
# address instructions between the arrival and the LSE barrier). 0. its GPU tests, then main / prefetch
# alternating, three rounds, 128K / 32K batch 1 and 128K batch 32 (unchanged there: 7 splits), then its trace.
set -u
T="$(date +%Y-%m-%d)_s34"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
MRG=$PWD/.alt/int2_paged_merge.cu
if [ -f "$MRG" ]; then
  OSCARKV_KERNEL_SRC=$MRG timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py \
    > "$OUT/${T}_merge_tests.log" 2>&1
  t "GPU kernel tests (merge prefetch) rc=$?"; tail -1 "$OUT/${T}_merge_tests.log" | cut -c1-200
  grep -E "^FAILED|^ERROR" "$OUT/${T}_merge_tests.log" | head -5 | cut -c1-300
  mkdir -p /tmp/abm
  for r in 1 2 3; do
    for k in main merge; do
      src=""; [ $k = merge ] && src=$MRG
      OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" \
        --no-flashinfer --no-triton --no-append --sweep --sweep-variants 4 --sweep-scales 1.0 \
        --sweep-points 131072x1,32768x1 > "/tmp/abm/${T}_${k}_${r}.log" 2>&1
      echo "$k round $r: $(grep -E '^sweep' "/tmp/abm/${T}_${k}_${r}.log" | sed 's/sweep L=//' | cut -c1-60 | tr '\n' ';')"
      [ $r = 1 ] && OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 \
        --contexts "" --no-flashinfer --no-triton --no-append --sweep --sweep-variants 11 --sweep-scales 1.0 \
        --sweep-points 131072x32 2>&1 | grep -E "^sweep" | sed "s/^/$k b32: /" | cut -c1-80
    done
  done | tee "$OUT/${T}_merge_ab.txt"
  t "merge A/B done"
  timeout 60 python3 bench/trace_decode.py --src "$MRG" --points 131072x1,32768x1 --modes b2b \
    --out "$OUT/${T}_merge_trace.json" > /tmp/abm/trace.log 2>&1
  t "merge trace rc=$?"; grep -E "^trace|rror" /tmp/abm/trace.log | cut -c1-500
fi
# BF16-tier split counts (added at the start of the thirty-fourth session, no kernel change): the s33 traces put
# the 2 x 8 BF16-tier CTAs of 128K batch 1 (splits 2+31) two per SM on 8 SMs that end ~13 us before the rest (the
# INT2 CTAs run on the other 124), and at 32K (2+14, one CTA per SM) the 16 BF16-tier CTAs take 16 of 128 SMs for
# ~3% of the bytes. Fewer BF16-tier CTAs: hp 1 with the INT2 count as planned, +1 and +2 (scales 1.0323 / 1.0714:
# 128K 31 / 32 / 33, 32K 14 / 14 / 15), against the plan (auto), two rounds.
for r in 1 2; do
  timeout 90 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton \
    --no-append --sweep --sweep-variants 4 --sweep-hp auto,1 --sweep-scales 1.0,1.0323,1.0714 \
    --sweep-points 131072x1,32768x1 2>&1 | grep -E "^sweep" | sed "s/^/hp round $r: /" | cut -c1-100
done | tee "$OUT/${T}_hp.txt"
t "hp splits done"
patch -s -p1 < bench/results/2026-12-05_s33_steal_per_warp.patch || { echo "the patch does not apply"; exit 2; }
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "GPU kernel tests (steal per warp) rc=$?"; tail -1 "$OUT/${T}_tests.log" | cut -c1-200
grep -E "^FAILED|^ERROR" "$OUT/${T}_tests.log" | head -8 | cut -c1-300
mkdir -p /tmp/ab
for r in 1 2 3; do
  for s in 0 85 70; do
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
