#!/bin/bash
# Thirty-first session, fourth call (main 54edcfe or later). One GPU, < 6 min, carry [".whl", ".kcache"].
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s31d.sh
# Call c (H100): at 128K batch 1 one BF16-tier split (1 + 31) ran 36.3 / 36.7 us against the plan's 2 + 31 at
# 37.3 / 37.3; at 64K equal, at 32K slower (the hp tier alone then takes longer than the INT2 tier). Before a plan rule
# takes it: 1 vs 2 hp splits at the batches where the plan gives 2 (64K / 128K x batch 1, 2, 4 with variant 4 and
# batch 8 with variant 11, the plan's variants there), twice, and 1 + 32 at 128K batch 1 (same grid as 2 + 31).
set -u
T="$(date +%Y-%m-%d)_s31d"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
B() { timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append --sweep "$@"; }
for r in 1 2; do
  B --sweep-variants 4 --sweep-hp 1,2 --sweep-scales 1.0 \
    --sweep-points 131072x1,131072x2,131072x4,65536x1,65536x2,65536x4 --out "$OUT/${T}_v4_$r.json" > "$OUT/${T}_v4_$r.log" 2>&1
  t "variant 4 round $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_v4_$r.log" | cut -c1-100
  B --sweep-variants 11 --sweep-hp 1,2 --sweep-scales 1.0 --sweep-points 131072x8,65536x8 \
    --out "$OUT/${T}_v11_$r.json" > "$OUT/${T}_v11_$r.log" 2>&1
  t "variant 11 round $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_v11_$r.log" | cut -c1-100
  B --sweep-variants 4 --sweep-hp 1 --sweep-scales 1.0323 --sweep-points 131072x1 \
    --out "$OUT/${T}_132_$r.json" > "$OUT/${T}_132_$r.log" 2>&1
  t "1 + 32 round $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_132_$r.log" | cut -c1-100
done
