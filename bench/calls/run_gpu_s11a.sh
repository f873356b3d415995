#!/bin/bash
# Eleventh session, device call A (issue 7), ~6 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s11a.sh
# The K side as u8 codes x int8 q (mma m16n8k32 / k16) for real: the kernel and cache GPU tests, a sweep of the
# variants at the target points, the decode table against FlashInfer / SDPA at the target points (head_dim 128
# and 64), the probes (loads only / math only) and the SM clock and board power at 128K batch 32.
set -u
T="$(date +%Y-%m-%d)_s11a"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python3 -m pytest -q tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|Error" "$OUT/${T}_tests.log" | tail -8 | cut -c1-300
timeout 200 python3 -m pytest -q tests/cache/test_gpu_paged.py >> "$OUT/${T}_tests.log" 2>&1
t "cache tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -6 | cut -c1-300
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --sweep --sweep-points 131072x1,32768x1,131072x32,32768x32,16384x128 \
  --sweep-variants 0,1,2,3,4,5,6,7 --sweep-scales 1.0 --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep.log" | cut -c1-200
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append \
  --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|accuracy|Error" "$OUT/${T}_table.log" | cut -c1-300
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --head-dim 64 \
  --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_table64.json" > "$OUT/${T}_table64.log" 2>&1
t "table d64 rc=$?"; grep -E "^L=|copy bandwidth|accuracy|Error" "$OUT/${T}_table64.log" | cut -c1-300
timeout 100 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --probe --probe-points 131072x1,32768x1,131072x32 --probe-variants 4,0 --probe-modes 1,7 \
  --out "$OUT/${T}_probe.json" > "$OUT/${T}_probe.log" 2>&1
t "probe rc=$?"; grep -E "^probe|Error" "$OUT/${T}_probe.log" | cut -c1-250
timeout 60 python3 bench/clock_probe.py 131072 32 0 --modes 0,1,7,-1 --seconds 3 > "$OUT/${T}_clock_b32.log" 2>&1
t "clock b32 rc=$?"; grep -E "probe|Error" "$OUT/${T}_clock_b32.log" | cut -c1-200
