#!/bin/bash
# Thirty-second session: one call that does what the card allows. One GPU, carry [".whl", ".kcache"].
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s32.sh
# On an H200 (its rows predate the per-card plan and the last four step changes): issue 7's rows at 128K batch 1 / 32
# and 32K batch 1 / 32 / 128 with every peer in the same run, then equal memory for both models (run_gpu_s31b.sh's
# call, plus 128K batch 1). On an H100 nothing (run_gpu_s32b.sh holds the H100 work, s32a's chain included).
# Thirty-second session: not run (no machine came; then none was lent for the rest of the session). Thirty-third session: it came
# once on an H100 (printed "not an H200", nothing run); run_gpu_s33h.sh supersedes it and run_gpu_s32h2.sh (read bound first).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
T="$(date +%Y-%m-%d)_s32h"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s32
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for r in 1 2; do
  timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 131072 \
    --batches 1,32 --out "$OUT/${T}_128k_$r.json" > "$OUT/${T}_128k_$r.log" 2>&1
  t "128K round $r rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_128k_$r.log" | cut -c1-330
done
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 32768 \
  --batches 1,32,128 --out "$OUT/${T}_32k.json" > "$OUT/${T}_32k.log" 2>&1
t "32K rc=$?"; grep -E "^L=|rror" "$OUT/${T}_32k.log" | cut -c1-330
for m in qwen3-4b qwen3-8b; do
  [ $(left) -lt 90 ] && break
  eq_memory $m
done
