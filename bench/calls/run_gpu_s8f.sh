#!/bin/bash
# Eighth session, device call F (issue 7), ~40 s on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s8f.sh
# Clock and power of the read floor's bare read of the same bytes (128K batch 32, mode -1) beside our loads-only
# probe (1) and the full kernel (0): is our load path, not DRAM, what holds the call at the power limit?
set -u
T="$(date +%Y-%m-%d)_s8f"
source bench/gpu_env.sh
timeout 100 python3 bench/clock_probe.py 131072 32 0 --modes=-1,1,0,-1 --seconds 4 2>&1 | grep -v Warning | tee "$OUT/${T}_clocks.log"
