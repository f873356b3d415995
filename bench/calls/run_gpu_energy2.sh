#!/bin/bash
# Prepared in the fifteenth session, not yet run. One H200, < 60 s, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_energy2.sh
# Issue 7, 128K batch 32 (power-bound at 700 W; fifteenth session call a: bare read of the random bytes 0.379 J per
# call at 699 W, our loads-only probe 0.473 J, the full call 0.575 J): where do the loads' extra 0.094 J go: the
# access pattern (the pool's records, one KV head's blocks in table order, read and discarded: modes -4 / -5) or
# the cp.async ring into shared memory (probe 1)? Same board, one process: full call, loads only, bare read, and
# the records read at two grids.
set -u
T="$(date +%Y-%m-%d)_energy2"
source bench/gpu_env.sh
timeout 50 python3 bench/clock_probe.py 131072 32 0 --modes 0,1,-1,-4,-5 --seconds 3 > "$OUT/${T}_b32.log" 2>&1
t "b32 rc=$?"; grep -E "^L=|Error" "$OUT/${T}_b32.log"
