#!/bin/bash
# Thirty-first session, third call (main 653639d or later). One GPU, < 5 min, carry [".whl", ".kcache"].
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s31c.sh
# At batch 1 the plan gives the BF16 sink / recent tier 2 of each KV head's 16 splits at 32K and 64K (2 + 14: 128
# CTAs, one per SM; 2 + 31 at 128K), and those 16 CTAs end long before the INT2 CTAs do: is an SM's share of the
# INT2 stream worth more than the hp tier's second split? Split sweep of variant 4 with 1 or 2 hp splits and
# 14 / 15 / 16 INT2 splits (scales 1, 15/14, 16/14 of the plan's count; 31 / 33 / 35 at 128K), twice; then the
# fixed-cost diagnosis (empty call, loads only) at 32K and 128K batch 1 on this card.
set -u
T="$(date +%Y-%m-%d)_s31c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for r in 1 2; do
  timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
    --sweep --sweep-variants 4 --sweep-hp 1,2 --sweep-scales 1.0,1.0714,1.1429 --sweep-points 32768x1,65536x1,131072x1 \
    --out "$OUT/${T}_hp_$r.json" > "$OUT/${T}_hp_$r.log" 2>&1
  t "hp sweep $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_hp_$r.log" | cut -c1-100
done
timeout 120 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
  --diag 32768x1:4,131072x1:4 --out "$OUT/${T}_diag.json" > "$OUT/${T}_diag.log" 2>&1
t "diag rc=$?"; grep -E "^diag|rror" "$OUT/${T}_diag.log" | cut -c1-300
