#!/bin/bash
# Seventh session, device call D (issue 7), < 5 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s7d.sh
# 18 warps per SM at 112 registers (variants 10 / 11: 6 warps x 3 CTAs, rings 4 / 6; 12: 9 warps x 2 CTAs)
# against the default 16 at 128 (v0: 4 x 4, v4: 8 x 2): GPU tests of every variant and the sweep (PDL + early
# reads, planned split counts), head_dim 128 and 64.
set -u
T="$(date +%Y-%m-%d)_s7d"
source bench/gpu_env.sh
timeout 150 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -6
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 \
  --sweep --sweep-points 131072x1,32768x1,131072x8,131072x32,32768x32,16384x128,32768x59 \
  --sweep-variants 4,0,10,11,12 --sweep-scales 1.0 \
  --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep.log" | cut -c1-300
timeout 60 python3 bench/bench_decode.py --head-dim 64 --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --sweep --sweep-points 131072x1,131072x32 --sweep-variants 4,0,10,12 --sweep-scales 1.0 \
  --out "$OUT/${T}_sweep64.json" > "$OUT/${T}_sweep64.log" 2>&1
t "sweep64 rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep64.log" | cut -c1-300
