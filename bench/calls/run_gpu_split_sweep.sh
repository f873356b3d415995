#!/bin/bash
# Prepared in the fifteenth session, not yet run. One H200, < 4 min, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_split_sweep.sh
# Issue 7: data to refit the INT2 split model under split-major dispatch (CudaDecodeConfig.cta_order). Fifteenth
# session, call b: the planned count is the fastest or within 1% at five of six swept points, but at 32K batch 8
# 3+8 splits take 57.3 us against the planned 3+5 at 66.6 (the model counts the short BF16-tier CTAs as whole CTAs
# and assumes an SM's time is linear in its CTAs, which fails where an SM holds too few warps to saturate).
# Sweep x0.5 .. x3 of the planned count at batch 2-16 (one to three waves), 8K-128K.
set -u
T="$(date +%Y-%m-%d)_split_sweep"
source bench/gpu_env.sh
timeout 220 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts "" --sweep --sweep-variants 0,4 --sweep-scales 0.5,0.75,1.0,1.5,2.0,3.0 \
  --sweep-points 8192x8,16384x4,32768x4,32768x8,32768x16,65536x4,65536x8,65536x16,131072x2,131072x4,131072x16 \
  --out "$OUT/${T}.json" > "$OUT/${T}.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep" "$OUT/${T}.log"
