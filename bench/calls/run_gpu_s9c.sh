#!/bin/bash
# Ninth session, device call C (issue 7), ~4 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s9c.sh
# Calls A / B: the TMA ring and the register ring (removed again: bench/results/2026-12-03_s9_load_paths.patch) ran
# at higher clocks for the same ~694 W but no faster; plain register loads of our records (probe 8) still draw
# 660-697 W where the bare read draws 423-495 W; head-major records with sequential ids save ~3%. The bare read
# loads evict-first: does the L2 evict-first policy on the INT2 records (CudaDecodeConfig.l2_evict_first) lower
# the power? GPU tests; clock / power / time with and without it, and (control for call B, which had none) with
# head-major records in the same call; the sweep with and without it.
set -u
T="$(date +%Y-%m-%d)_s9c"
source bench/gpu_env.sh
timeout 150 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -8
(timeout 70 python3 bench/clock_probe.py 131072 32 0,4 --modes=-1,0,1,8 --seconds 3
 timeout 60 python3 bench/clock_probe.py 131072 32 0,4 --modes=0,1,8 --seconds 3 --evict-first
 timeout 50 python3 bench/clock_probe.py 131072 32 0 --modes=0,8 --seconds 3 --heads-outer) 2>&1 | grep -v Warning | tee "$OUT/${T}_clocks.log"
t "clocks"
for ev in "" "--evict-first"; do
timeout 100 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 $ev \
  --sweep --sweep-points 131072x1,32768x1,131072x32,32768x32,16384x128 --sweep-variants 4,0 --sweep-scales 1.0 \
  --out "$OUT/${T}_sweep$ev.json" > "$OUT/${T}_sweep$ev.log" 2>&1
t "sweep $ev rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep$ev.log" | cut -c1-200
done
