#!/bin/bash
# Eighth session, device call E (issue 7), ~1 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s8e.sh
# Call D: at 128K batch 32 the loads alone take 653 us, the math alone 692, the full kernel 871. SM clock and board
# power while each runs back to back (nvidia-smi every 100 ms): is the full kernel held back by the power limit?
set -u
T="$(date +%Y-%m-%d)_s8e"
source bench/gpu_env.sh
(timeout 100 python3 bench/clock_probe.py 131072 32 0 --modes 0,1,7,0 --seconds 4
 timeout 60 python3 bench/clock_probe.py 131072 1 4 --modes 0,1,7 --seconds 3) 2>&1 | grep -v Warning | tee "$OUT/${T}_clocks.log"
