#!/bin/bash
# Eighth session, device call D (issue 7), < 6 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s8d.sh
# The kernel as kept (variants 10-16 of call B reverted: bench/results/2026-12-03_s8b_variants.patch; the V-offset
# fold out of the tile loop kept). GPU kernel tests; probes at 128K batch 32 / 1: 1 = INT2 loads only, 6 =
# everything but the code unpack, 7 = the math alone (no INT2 loads after the first ring fill), for rings of 4
# (v0, v4) and 8 tiles (v1, v7); then the decode table (32K / 128K, batch 1 / 32) with FlashInfer BF16 / FP8.
set -u
T="$(date +%Y-%m-%d)_s8d"
source bench/gpu_env.sh
timeout 120 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -4
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --probe --probe-points 131072x32,131072x1 --probe-variants 0,1,4,7 \
  --probe-modes 1,6,7 --out "$OUT/${T}_probe.json" > "$OUT/${T}_probe.log" 2>&1
t "probe rc=$?"; grep -E "^probe|Error" "$OUT/${T}_probe.log" | cut -c1-250
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append \
  --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|Error" "$OUT/${T}_table.log" | cut -c1-300
