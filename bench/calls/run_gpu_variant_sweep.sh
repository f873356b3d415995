#!/bin/bash
# Prepared in the sixteenth session, not yet run. One H200, < 4 min, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_variant_sweep.sh
# Issue 7: the plan's variant rule (cuda_ops.DecodePlan: variant 4 when batch x KV heads < 64, else 0) dates from
# the seventh session's kernel. Sixteenth session, call c: at batch 8 (8 KV heads: 64, variant 0) variant 4 with its
# planned splits beats variant 0 at 32K (57.5 vs 67.0 us) and 64K (106.8 vs 110.8) but not at 8K (29.3 vs 28.1), and
# at 128K batch 16 variant 4 at half its splits is fastest (407.5 vs 425.4). Both variants at x0.5 .. x2 of their
# planned splits, batch 8 and 16 at every context, to decide the threshold (and whether it should depend on length).
set -u
T="$(date +%Y-%m-%d)_variant_sweep"
source bench/gpu_env.sh
timeout 220 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts "" --sweep --sweep-variants 0,4 --sweep-scales 0.5,0.75,1.0,1.5,2.0 \
  --sweep-points 4096x8,16384x8,65536x8,131072x8,4096x16,16384x16,65536x16,4096x32,32768x32 \
  --out "$OUT/${T}.json" > "$OUT/${T}.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep" "$OUT/${T}.log" | cut -c1-200
