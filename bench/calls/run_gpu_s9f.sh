#!/bin/bash
# Ninth session, device call F (issue 7), ~1 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s9f.sh
# Is the tile math latency-bound per warp (time ~ 1 / warps per SM)? Math-only (probe 7) and full times for the
# same loop with 16 warps per SM (v0: 4 warps x 4 CTAs, v1: the same with a ring of 8) and 12 (v3: 4 x 3 CTAs at
# 168 registers, ring of 10), at 128K batch 32 and batch 1.
set -u
T="$(date +%Y-%m-%d)_s9f"
source bench/gpu_env.sh
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --probe --probe-points 131072x32,131072x1 --probe-variants 0,1,3 --probe-modes 7,1 \
  --out "$OUT/${T}_probe.json" > "$OUT/${T}_probe.log" 2>&1
t "probe rc=$?"; grep -E "^probe|Error" "$OUT/${T}_probe.log" | cut -c1-250
