#!/bin/bash
# Sixth session, device call D (issue 7), < 5 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s6d.sh
# GPU kernel tests after the record-layout check fix (hkv = 1 pools), the batch-8/32 variant choice (0 vs 4),
# and append / demotion cost per step on record pools.
set -u
T="$(date +%Y-%m-%d)_s6d"
source bench/gpu_env.sh
timeout 120 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|128K rel" "$OUT/${T}_tests.log" | tail -8
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton \
  --contexts 4096 --batches 1 --append-batches 1,8,256 \
  --sweep --sweep-points 131072x32,32768x32,131072x8,16384x128 --sweep-variants 0,4 --sweep-scales 1.0 \
  --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|^append|^L=|Error" "$OUT/${T}_sweep.log" | cut -c1-300
