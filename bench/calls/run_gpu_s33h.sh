#!/bin/bash
# Ran in the thirty-fifth session as `OSCARKV_COMMIT=cbb5c5b bash bench/calls/run_gpu_s33h.sh` on an H200
# (bench/results/2026-12-06_s33h_*; the floor's files did not come back, its lines are in ..._s33h_floor.txt).
# Thirty-third session, H200 only (on another card it prints so and stops). One GPU, < 10 min, carry [".whl", ".kcache"].
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s33h.sh
# The H200's figures of issues 7 and 8 predate the per-card plan and the last step changes. In one call:
# 1. the read bound at 128K / 32K batch 1 (bare read, the pool's records as the kernel reads them): is <= 23 us
#    within the bytes' reach on this card, and is the kernel's loop at the records' read rate?
# 2. issue 7's rows with every peer in the same run: 128K batch 1 / 32, 32K batch 1 / 32 / 128;
# 3. step_ablate of Qwen3-8B at 128K batch 1 (issue 8's bound on this card), then the 4B's if time is left.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
T="$(date +%Y-%m-%d)_s33h"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s33
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 120 python3 bench/bench_decode.py --contexts "" --no-flashinfer --no-triton --no-append \
  --read-floor 131072x1,32768x1 --read-records 131072x1,32768x1 --out "$OUT/${T}_floor.json" > "$OUT/${T}_floor.log" 2>&1
t "read floor rc=$?"; grep -E "^read|^copy" "$OUT/${T}_floor.log" | cut -c1-250
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 131072 \
  --batches 1,32 --out "$OUT/${T}_128k.json" > "$OUT/${T}_128k.log" 2>&1
t "128K rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_128k.log" | cut -c1-330
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 32768 \
  --batches 1,32,128 --out "$OUT/${T}_32k.json" > "$OUT/${T}_32k.log" 2>&1
t "32K rc=$?"; grep -E "^L=|rror" "$OUT/${T}_32k.log" | cut -c1-330
for m in qwen3-8b qwen3-4b; do
  [ $(left) -lt 150 ] && break
  timeout $(( $(left) - 5 )) python3 bench/step_ablate.py --model $m --context 131072 --bf16-backends CUDNN_ATTENTION \
    --out "$OUT/${T}_ablate_$m.json" > "$OUT/${T}_ablate_$m.log" 2>&1
  t "ablate $m 128K rc=$?"; tail -3 "$OUT/${T}_ablate_$m.log" | cut -c1-250
done
