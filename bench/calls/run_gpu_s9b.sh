#!/bin/bash
# Ninth session, device call B (issue 7), ~3 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s9b.sh
# Call A: probe 8 (plain register loads of the same records) also draws ~697 W, the bare read of the same bytes
# 495 W, and pool order (random vs sequential block ids) changes nothing. Is it the access pattern: a CTA reads one
# 1152-byte record in every 9216 bytes (block-major records, 8 KV heads)? Head-major records (heads_outer) make a
# CTA stream contiguous memory over runs of consecutive block ids. Tests of the head-major pool; clock / power /
# time with head-major records, sequential and random block ids; the sweep on head-major sequential pools.
set -u
T="$(date +%Y-%m-%d)_s9b"
source bench/gpu_env.sh
timeout 100 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py -k "heads_outer or long_single" > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -8
(timeout 80 python3 bench/clock_probe.py 131072 32 0,14,4 --modes=-1,0,1,8 --seconds 3 --heads-outer --sequential
 timeout 60 python3 bench/clock_probe.py 131072 32 0,14 --modes=0,8 --seconds 3 --heads-outer) 2>&1 | grep -v Warning | tee "$OUT/${T}_clocks.log"
t "clocks"
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --heads-outer --sequential \
  --sweep --sweep-points 131072x1,32768x1,131072x32,32768x32,16384x128 \
  --sweep-variants 4,0,10,12,14,15,16 --sweep-scales 1.0 \
  --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep.log" | cut -c1-200
