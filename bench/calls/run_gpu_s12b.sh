#!/bin/bash
# Twelfth session, device call B, < 8 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s12b.sh
# Call A's sweep found fewer INT2 splits faster than the split model's choice at 32K batch 1 (14.0 vs 15.4 us)
# and 128K batch 32 (748 vs 763 us): the split model was tuned for the fp16-K kernel. This call sweeps the split
# count (x0.25 .. x1.25 of the planned count, variants 0 and 4) over the decode table's points, and one BF16-tier
# split against the planned count at batch 32 / 128, to refit the model.
set -u
T="$(date +%Y-%m-%d)_s12b"
source bench/gpu_env.sh
timeout 270 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --no-flashinfer \
  --contexts 4096 --batches 1 --sweep \
  --sweep-points 4096x1,16384x1,32768x1,65536x1,131072x1,16384x8,65536x8,131072x8 --sweep-variants 0,4 \
  --sweep-scales 0.25,0.375,0.5,0.625,0.75,1.0,1.25 --out "$OUT/${T}_sweep1.json" > "$OUT/${T}_sweep1.log" 2>&1
t "sweep b1/b8 rc=$?"; grep -c "^sweep" "$OUT/${T}_sweep1.log"
timeout 270 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --no-flashinfer \
  --contexts 4096 --batches 1 --sweep \
  --sweep-points 4096x32,32768x32,131072x32,4096x128,16384x128,32768x128 --sweep-variants 0,4 --sweep-hp auto,1 \
  --sweep-scales 0.25,0.375,0.5,0.625,0.75,1.0 --out "$OUT/${T}_sweep2.json" > "$OUT/${T}_sweep2.log" 2>&1
t "sweep b32/b128 rc=$?"; grep -c "^sweep" "$OUT/${T}_sweep2.log"
