#!/bin/bash
# Ran in the thirty-fourth session as `BUDGET=170 OSCARKV_COMMIT=dbe154c bash bench/calls/run_gpu_s34.sh` on an H100
# (mixed round 1 and the merge A/B; mixed round 2 and the merge trace were left out by the budget; BENCHMARKS.md).
# Prepared in the thirty-third session, reworked at the start of the thirty-fourth. Any card, one GPU,
# < 10 min, carry [".whl", ".kcache", ".alt"]:
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s34.sh
# Prebuilt on the CPU machine (.kcache): main 254acd31..., the merge prefetch 429e6a6d... (trace deaa5051...), the
# mixed BF16-tier CTAs 8751dd60... (and, for a later call, main's trace fb918a97..., stealing d2b1a6cc... / 9c9159b0...).
# To regenerate .alt: patch -s -o .alt/int2_paged_merge.cu src/oscarkv/kernels/cuda/int2_paged.cu \
#   < bench/results/2026-12-05_s33_merge_prefetch.patch (mixed: the .cu of 2026-12-06_s34_mixed_hp.patch applied), then
# run_gpu_s32b.sh's header's build commands for each source.
# 1. The merge prefetch (.alt/int2_paged_merge.cu): at 128K batch 1 the merging CTA's splits past its 12 register
# loads per thread (33 splits, two groups: 5 + 4 of them) go to shared memory by cp.async beside the LSE loads instead
# of a second L2 round trip after the weights (the traces put the output stage, event 6 -> 7, at 1.2 us at 128K against
# 0.6 at 32K), and the partials are indexed in 32 bits. Its GPU tests, then main / prefetch alternating, two rounds,
# 128K / 32K batch 1 and 128K batch 32 once (unchanged there: 7 splits); its trace at the end if time is left.
# 2. Mixed BF16-tier CTAs (2026-12-06_s34_mixed_hp.patch, applied here, reverted after; prebuilt 8751dd60...):
# CudaDecodeConfig.mixed_hp_warps = n puts only warps 0 .. n - 1 of a BF16-tier CTA on the BF16 tiles and deals INT2
# tiles to its other warps (as many per warp as each INT2-tier warp): GPU tests (the mixed path and the run-time INT2
# step of every variant), then the patched kernel with mixed off (its control, beside main's figures), n = 1 and 2,
# split lists that keep the grid's CTA count (33 splits per KV head at 128K, 16 at 32K) and give a BF16-tier warp at
# most 2 of the 20 BF16 tiles (in the s33 traces a BF16-tier CTA took 7-9 us at 32K and 13-16 us at 128K back to
# back for <= 2 tiles per warp: its tiles are dependent loads with no pipeline).
# Why 2: the s33 traces put the 2 x 8 BF16-tier CTAs of 128K batch 1 (splits 2+31) two per SM on 8 SMs that ended
# ~13 us before the rest (the INT2 tier streamed on the other 124), and at 32K (2+14, one CTA per SM) the 16 BF16-tier
# CTAs took 16 of 128 SMs for ~3% of the bytes; one BF16-tier split instead of two (4 such SMs) gained 0.2-1.0 us at
# 128K batch 1 (run_gpu_s31d.sh), so the BF16-tier split counts alone are not timed again here.
# Order (the device budget may be short): mixed tests + round 1, merge tests + A/B, mixed round 2,
# the merge trace; each later step only while time is left (BUDGET: seconds this call may take, default 585).
# Work stealing, second form (2026-12-05_s33_steal_per_warp.patch): run_gpu_s35.sh.
set -u
T="$(date +%Y-%m-%d)_s34"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
MRG=$PWD/.alt/int2_paged_merge.cu
MIXP=bench/results/2026-12-06_s34_mixed_hp.patch
mkdir -p /tmp/abm

merge_part() {  # 1. merge prefetch: GPU tests, main / prefetch alternating (two rounds), 128K b32 once
  [ -f "$MRG" ] || { echo "no $MRG"; return; }
  OSCARKV_KERNEL_SRC=$MRG timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py \
    > "$OUT/${T}_merge_tests.log" 2>&1
  t "GPU kernel tests (merge prefetch) rc=$?"; tail -1 "$OUT/${T}_merge_tests.log" | cut -c1-200
  grep -E "^FAILED|^ERROR" "$OUT/${T}_merge_tests.log" | head -5 | cut -c1-300
  for r in 1 2; do
    for k in main merge; do
      [ $(left) -lt 40 ] && break
      src=""; [ $k = merge ] && src=$MRG
      OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" \
        --no-flashinfer --no-triton --no-append --sweep --sweep-variants 4 --sweep-scales 1.0 \
        --sweep-points 131072x1,32768x1 > "/tmp/abm/${T}_${k}_${r}.log" 2>&1
      echo "$k round $r: $(grep -E '^sweep' "/tmp/abm/${T}_${k}_${r}.log" | sed 's/sweep L=//' | cut -c1-60 | tr '\n' ';')"
      [ $r = 1 ] && [ $(left) -gt 60 ] && OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 \
        --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append --sweep --sweep-variants 11 \
        --sweep-scales 1.0 --sweep-points 131072x32 2>&1 | grep -E "^sweep" | sed "s/^/$k b32: /" | cut -c1-80
    done
  done | tee -a "$OUT/${T}_merge_ab.txt"
  t "merge A/B done"
}

mixed_part() {  # 3. mixed BF16-tier CTAs, round $1 (round 1 runs the GPU tests first); the patch is reverted after
  patch -s -p1 < $MIXP || { echo "the mixed patch does not apply"; return; }
  if [ "$1" = 1 ]; then
    sel=""; [ $(left) -lt 300 ] && sel="-k mixed"  # a short call: the mixed test alone
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py $sel > "$OUT/${T}_mixed_tests.log" 2>&1
    t "GPU kernel tests (mixed) rc=$?"; tail -1 "$OUT/${T}_mixed_tests.log" | cut -c1-200
    grep -E "^FAILED|^ERROR" "$OUT/${T}_mixed_tests.log" | head -8 | cut -c1-300
  fi
  for cfg in "0:131072x1=2+31,32768x1=2+14" "1:131072x1=10+23,131072x1=16+17,32768x1=10+6,32768x1=8+8" \
             "2:131072x1=5+28,131072x1=10+23,32768x1=8+8,32768x1=5+11"; do
    mx=${cfg%%:*}; sp=${cfg#*:}
    [ $(left) -lt 40 ] && break
    timeout $(( $(left) - 5 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
      --no-triton --no-append --mixed-hp $mx --sweep --sweep-variants 4 --sweep-splits $sp 2>&1 \
      | grep -E "^sweep|rror" | sed "s/^/mixed $mx round $1: /" | cut -c1-110
  done | tee -a "$OUT/${T}_mixed_ab.txt"
  t "mixed round $1 done"
  patch -R -s -p1 < $MIXP
}

mixed_part 1
[ $(left) -gt 100 ] && merge_part
[ $(left) -gt 120 ] && mixed_part 2
if [ -f "$MRG" ] && [ $(left) -gt 70 ]; then
  timeout 60 python3 bench/trace_decode.py --src "$MRG" --points 131072x1,32768x1 --modes b2b \
    --out "$OUT/${T}_merge_trace.json" > /tmp/abm/trace.log 2>&1
  t "merge trace rc=$?"; grep -E "^trace|rror" /tmp/abm/trace.log | cut -c1-500
fi
