#!/bin/bash
# Eighth session, device call B (issue 7), < 5 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s8b.sh
# The V-offset fold moved out of the tile loop (every 32 tiles, at the block-id refill) in every variant, and
# variants under measurement: 10 = 4 warps x 3 CTAs (168 registers), 11 / 12 / 13 = 0 / 4 / 10 with one
# score-MMA chain, 14 = 0 with the loop unrolled by the ring depth (static slots, block ids
# from shared memory), 15 / 16 = 0 / 4 with both. GPU tests of every variant, then the sweep (PDL + early reads, planned split counts).
set -u
T="$(date +%Y-%m-%d)_s8b"
source bench/gpu_env.sh
timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -8
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 \
  --sweep --sweep-points 131072x1,32768x1,4096x1,131072x8,131072x32,32768x32,16384x128,32768x59 \
  --sweep-variants 4,0,10,11,12,13,14,15,16 --sweep-scales 1.0 \
  --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep.log" | cut -c1-200
