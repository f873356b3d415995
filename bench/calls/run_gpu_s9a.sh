#!/bin/bash
# Ninth session, device call A (issue 7), < 7 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s9a.sh
# Eighth session: the batch-32 call is power-bound (full kernel ~693 W at 1.69 GHz; a bare read of the same bytes
# ~495 W at 1.98 GHz) and the loads-only probe already draws 694 W. New here: probe 8 (probe 1's loads as plain
# 16-byte loads into registers, no shared memory), load path 1 = TMA bulk copies into the ring (variants 10-13 =
# shapes of 0 / 1 / 4 / 7), load path 2 = no ring, a register ring filled by plain loads (14 = 4 warps x 3 CTAs,
# 4 tiles ahead; 15 = 8 warps x 1 CTA, 8 ahead; 16 = 4 warps x 2 CTAs, 8 ahead). GPU tests of every variant;
# clock / power / time per variant and probe at 128K batch 32 (random and sequential block order); the sweep.
set -u
T="$(date +%Y-%m-%d)_s9a"
source bench/gpu_env.sh
timeout 240 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -8
(timeout 120 python3 bench/clock_probe.py 131072 32 0,10,14,16,15 --modes=-1,0,1,8 --seconds 3
 timeout 60 python3 bench/clock_probe.py 131072 32 0 --modes=0,1,8 --seconds 3 --sequential) 2>&1 | grep -v Warning | tee "$OUT/${T}_clocks.log"
t "clocks"
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 \
  --sweep --sweep-points 131072x1,32768x1,4096x1,131072x32,32768x32,16384x128 \
  --sweep-variants 4,0,10,11,12,13,14,15,16 --sweep-scales 1.0 \
  --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|Error" "$OUT/${T}_sweep.log" | cut -c1-200
