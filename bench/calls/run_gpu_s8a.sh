#!/bin/bash
# Eighth session, device call A (issue 7), < 6 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s8a.sh
# Which SASS instructions of the INT2 tile loop the warps stall on, and why: Nsight Compute's per-instruction
# stall sampling (source page, SASS view, CSV) for one call at 128K batch 32 (variant 0) and batch 1
# (variant 4). The seventh session measured 58.7% issue efficiency with no pipe saturated, and neither a
# software pipeline nor 18 warps per SM helped; this says where the remaining cycles sit.
set -u
T="$(date +%Y-%m-%d)_s8a"
source bench/gpu_env.sh
for pt in "131072 32 0" "131072 1 4"; do
  tag=$(echo $pt | tr ' ' '_')
  timeout 150 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
    python3 bench/ncu_one.py $pt > "$OUT/${T}_ncu_source_${tag}.csv" 2>&1
  t "ncu source $pt rc=$?"
  python3 bench/ncu_stalls.py "$OUT/${T}_ncu_source_${tag}.csv" --top 40  # (as run: an inline parser that missed the header row)
done
# v4 (8 warps x 2 CTAs) against v0 (4 x 4) at large batch, three repeats in one process each, to decide the
# default rule on more than one sample (call D of the seventh session: 32K b59 451 vs 487 us, but -7..+4% elsewhere)
for rep in 1 2 3; do
  timeout 100 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
    --contexts 4096 --batches 1 --sweep --sweep-points 32768x59,131072x32,32768x32,16384x128,65536x16,131072x8 \
    --sweep-variants 0,4 --sweep-scales 1.0 --out "$OUT/${T}_sweep_r$rep.json" > "$OUT/${T}_sweep_r$rep.log" 2>&1
  t "sweep r$rep rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep_r$rep.log" | cut -c1-200
done
