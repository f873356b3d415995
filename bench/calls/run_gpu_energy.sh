#!/bin/bash
# Prepared in the fourteenth session, run in the fifteenth (call a). One H200, < 90 s, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_energy.sh
# Issue 7, the 128K batch-32 target (5.5x BF16): is the call bound by the board's power cap through the energy of
# the bytes alone? On one board: the idle power, then clock and power of the full kernel, its loads only (probe
# 1), its math only (probe 7), a bare read of the same random bytes (-1) and of zero bytes (-3); batch 1 beside.
set -u
T="$(date +%Y-%m-%d)_energy"
source bench/gpu_env.sh
nvidia-smi --query-gpu=clocks.sm,power.draw,power.limit,temperature.gpu --format=csv -lms 200 > "$OUT/${T}_idle.csv" &
SMI=$!; sleep 3; kill $SMI
t "idle (median power, W): $(tail -n +2 "$OUT/${T}_idle.csv" | cut -d, -f2 | sed 's/ W//' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
timeout 60 python3 bench/clock_probe.py 131072 32 0 --modes 0,1,7,-1,-3 --seconds 3 > "$OUT/${T}_b32.log" 2>&1
t "b32 rc=$?"; grep -E "^L=" "$OUT/${T}_b32.log"
timeout 30 python3 bench/clock_probe.py 131072 1 4 --modes 0,1,7,-1 --seconds 2 > "$OUT/${T}_b1.log" 2>&1
t "b1 rc=$?"; grep -E "^L=" "$OUT/${T}_b1.log"
