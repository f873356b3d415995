#!/bin/bash
# Ninth session, device call E (issue 7), ~1.5 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s9e.sh
# The batch-1 bound with the kernel as kept (L2 evict-first by default): the read floor of the same bytes, and the
# probes at 128K / 32K batch 1 (1 = our cp.async ring's loads only, 8 = the same loads as plain register loads,
# 7 = the math only) for v4 (the batch-1 default) and v0.
set -u
T="$(date +%Y-%m-%d)_s9e"
source bench/gpu_env.sh
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --read-floor 131072x1,32768x1,131072x32 \
  --probe --probe-points 131072x1,32768x1 --probe-variants 4,0 --probe-modes 1,8,7 \
  --out "$OUT/${T}_probe.json" > "$OUT/${T}_probe.log" 2>&1
t "probe rc=$?"; grep -E "^probe|floor|Error" "$OUT/${T}_probe.log" | cut -c1-250
