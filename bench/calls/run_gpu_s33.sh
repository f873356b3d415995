#!/bin/bash
# Thirty-third session, any card. One GPU, < 10 min, carry [".whl", ".kcache"].
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s33.sh
# The thirty-second session's trace (H200, run_gpu_s32b.sh) put 128K batch 1's CTAs' loop ends at median 22.8 us and
# last 27.4 (no PDL): a 4.6 us tail inside the stream, beside 4.35 us of merge after it. Which CTAs make the tail?
# 1. the read bound of this card (bare read and the pool's records as the kernel reads them: is the loop at the
#    records' read rate?);
# 2. trace_decode (no_pdl, b2b) with the per-CTA records (SM, entry, PDL wait, loop end) of 128K / 32K batch 1;
# 3. variant 5 (1+15 splits, one 16-warp CTA per (head, split)) against the plan's variant 4 at 128K / 32K batch 1,
#    alternating, three rounds (s32b's one sample: 30.3 against 30.8 us at 128K on the H200).
set -u
T="$(date +%Y-%m-%d)_s33"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 120 python3 bench/bench_decode.py --contexts "" --no-flashinfer --no-triton --no-append \
  --read-floor 131072x1,32768x1 --read-records 131072x1,32768x1 --out "$OUT/${T}_floor.json" > "$OUT/${T}_floor.log" 2>&1
t "read floor rc=$?"; grep -vE "^accuracy" "$OUT/${T}_floor.log" | cut -c1-250 | head -20
timeout 150 python3 bench/trace_decode.py --points 131072x1,32768x1 --modes no_pdl,b2b --out "$OUT/${T}_trace.json" \
  > "$OUT/${T}_trace.log" 2>&1
t "trace rc=$?"; grep -E "^trace|rror" "$OUT/${T}_trace.log" | cut -c1-600
mkdir -p /tmp/ab
for r in 1 2 3; do
  for v in 4 5; do
    timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton \
      --no-append --sweep --sweep-variants $v --sweep-scales 1.0 --sweep-points 131072x1,32768x1 \
      > "/tmp/ab/${T}_v${v}_$r.log" 2>&1
    echo "variant $v round $r rc=$?: $(grep -E '^sweep' "/tmp/ab/${T}_v${v}_$r.log" | sed 's/sweep L=//' | cut -c1-60 | tr '\n' ';')"
  done
done | tee "$OUT/${T}_v45.txt"
t "variants 4 / 5 done"
