#!/bin/bash
# Thirteenth session, device call E (issue 7), < 5 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s13e.sh
# Variant 11 (pair mode: two tiles per step, both tiles' scores then one vote then both outputs, 8 warps,
# 8-tile rings, up to 255 registers, one CTA per SM): is the batch-1 stream one warp's chain of dependent tile
# instructions (call d)? (1) the kernel tests, variant 11 included, and its bit-equality with variant 7;
# (2) batch-1 split sweep of variants 4 / 11 and the fixed-cost diag of variant 11, twice.
set -u
T="$(date +%Y-%m-%d)_s13e"
source bench/gpu_env.sh
timeout 200 python3 -m pytest -q tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -8 | cut -c1-300
for r in 1 2; do
timeout 120 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --no-flashinfer \
  --contexts 4096 --batches 1 --sweep --sweep-points 16384x1,32768x1,65536x1,131072x1 --sweep-variants 4,11 \
  --sweep-scales 0.75,1.0,1.5,2.0 --diag 32768x1:11,131072x1:11 \
  --out "$OUT/${T}_sweep$r.json" > "$OUT/${T}_sweep$r.log" 2>&1
t "sweep $r rc=$?"; grep -E "^sweep|^diag|Error" "$OUT/${T}_sweep$r.log" | cut -c1-200
done
