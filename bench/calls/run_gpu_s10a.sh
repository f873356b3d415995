#!/bin/bash
# Tenth session, device call A (issue 7), ~4 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s10a.sh
# Does the DRAM access pattern or the data cost the power that holds batch 32 at 700 W? Bare reads of the same
# bytes as one grid-wide sweep (random / zero bytes) and as one stream per warp, and our kernel with contiguous
# split ranges (v0, v4) against interleaved tiles (v0i, v4i), each with SM clock and board power; then the
# kernel tests (interleave included) and a sweep of both assignments. Probe 9: the K side as u8 x s8 MMAs
# (timing stand-in for 8-bit K operands). Both interleave and probe 9 were removed in the eleventh session (probe 9
# became the kernel); this script is the record of what ran.
set -u
T="$(date +%Y-%m-%d)_s10a"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 120 python3 bench/clock_probe.py 131072 32 0,0i --modes 0,1,9,-1,-2,-3 --seconds 3 > "$OUT/${T}_clock_b32.log" 2>&1
t "clock b32 rc=$?"; grep -E "probe|Error" "$OUT/${T}_clock_b32.log" | cut -c1-200
timeout 60 python3 bench/clock_probe.py 131072 32 0,0i --modes 0,1 --seconds 3 --sequential > "$OUT/${T}_clock_b32_seq.log" 2>&1
t "clock b32 sequential rc=$?"; grep -E "probe|Error" "$OUT/${T}_clock_b32_seq.log" | cut -c1-200
timeout 60 python3 bench/clock_probe.py 131072 1 4,4i --modes 0,1,9,-1,-2 --seconds 2 > "$OUT/${T}_clock_b1.log" 2>&1
t "clock b1 rc=$?"; grep -E "probe|Error" "$OUT/${T}_clock_b1.log" | cut -c1-200
timeout 150 python3 -m pytest -q -x tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "tests rc=$?"; tail -3 "$OUT/${T}_tests.log" | cut -c1-300
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --sweep --sweep-points 131072x1,32768x1,131072x8,131072x32,32768x32,16384x128 \
  --sweep-variants 4,4i,0,0i --sweep-scales 1.0 --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep.log" | cut -c1-200
timeout 120 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append --sequential \
  --contexts 4096 --batches 1 --sweep --sweep-points 131072x1,32768x1,131072x32,16384x128 \
  --sweep-variants 4,4i,0,0i --sweep-scales 1.0 --out "$OUT/${T}_sweep_seq.json" > "$OUT/${T}_sweep_seq.log" 2>&1
t "sweep sequential rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep_seq.log" | cut -c1-200
timeout 120 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --probe --probe-points 131072x1,32768x1,131072x32 --probe-variants 4,0 --probe-modes 1,7,9 \
  --out "$OUT/${T}_probe.json" > "$OUT/${T}_probe.log" 2>&1
t "probe rc=$?"; grep -E "^probe|Error" "$OUT/${T}_probe.log" | cut -c1-250
