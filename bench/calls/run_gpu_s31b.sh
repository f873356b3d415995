#!/bin/bash
# Thirtieth session, for the device call after run_gpu_s31a.sh (main 545570f or later). One GPU, < 10 min, carry
# [".whl", ".kcache"]. Run as  OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s31b.sh
# DecodePlan now keeps variant 11 from 256 (sequence, KV head) pairs on the H100 80GB HBM3 (thirtieth session: 128K
# batch 32 910.4 / 911.1 us against 923.6 / 924.2 for 10, 4.02x / 4.04x FlashInfer FP8): issue 7's table rows at
# 128K batch 32 and 32K batch 1 / 32 / 128 with the plan, every peer in the same run, twice; then equal memory (its
# 32K batch-59 step now runs variant 11 too) for both models.
set -u
T="$(date +%Y-%m-%d)_s31b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s31
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for r in 1 2; do
  timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 131072 \
    --batches 32 --out "$OUT/${T}_b32_$r.json" > "$OUT/${T}_b32_$r.log" 2>&1
  t "128K batch 32 round $r rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_b32_$r.log" | cut -c1-330
done
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 32768 \
  --batches 1,32,128 --out "$OUT/${T}_32k.json" > "$OUT/${T}_32k.log" 2>&1
t "32K rc=$?"; grep -E "^L=|rror" "$OUT/${T}_32k.log" | cut -c1-330
for m in qwen3-4b qwen3-8b; do
  [ $(left) -lt 90 ] && break
  eq_memory $m
done
