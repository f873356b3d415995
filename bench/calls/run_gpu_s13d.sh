#!/bin/bash
# Thirteenth session, device call D (issue 7), < 4 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s13d.sh
# Is the batch-1 stream short of bytes in flight? With the per-SM split model, 32K batch 1 runs one 8-warp CTA
# per SM (2 + 14 splits, variant 4: 4-tile rings, ~37 KB in flight per SM, while ~32 B/ns per SM at a ~1.5 us
# loaded latency wants ~50 KB). Variants 7 (8 warps, 8-tile rings) and 6 (16 warps, 8-tile rings) hold 2x / 4x
# as much; the twelfth session's sweeps did not include them. Split sweep at four batch-1 contexts, and the
# loads-only / math-only probes at 32K for variants 4 and 7, twice.
set -u
T="$(date +%Y-%m-%d)_s13d"
source bench/gpu_env.sh
for r in 1 2; do
timeout 120 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --no-flashinfer \
  --contexts 4096 --batches 1 --sweep --sweep-points 16384x1,32768x1,65536x1,131072x1 --sweep-variants 4,6,7 \
  --sweep-scales 0.75,1.0,1.5 --probe --probe-points 32768x1,131072x1 --probe-variants 4,7 --probe-modes 1,7 \
  --out "$OUT/${T}_sweep$r.json" > "$OUT/${T}_sweep$r.log" 2>&1
t "sweep $r rc=$?"; grep -E "^sweep|^probe|Error" "$OUT/${T}_sweep$r.log" | cut -c1-200
done
