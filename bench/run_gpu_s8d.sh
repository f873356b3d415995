#!/bin/bash
# Eighth session, device call D (issue 7), < 3 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/run_gpu_s8d.sh
# Call C: at 128K batch 32 the loads alone take 646 us (89% of copy), everything but the unpack 736, the full
# kernel 869. Probe 7 adds the other side: the math alone (no INT2 loads after the first ring fill), for the ring
# depths 4 (v0, v15, v4, v16) and 8 (v1, v7).
set -u
T="$(date +%Y-%m-%d)_s8d"
source bench/gpu_env.sh
timeout 250 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --probe --probe-points 131072x32,131072x1 --probe-variants 0,15,1,4,16,7 \
  --probe-modes 1,6,7 --out "$OUT/${T}_probe.json" > "$OUT/${T}_probe.log" 2>&1
t "probe rc=$?"; grep -E "^probe|Error" "$OUT/${T}_probe.log" | cut -c1-250
