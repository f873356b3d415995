#!/bin/bash
# Thirty-sixth session. Any card, one GPU, < 10 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s36b.sh
# Issue 7's rows with every peer in the same run (128K batch 1 / 32, 32K batch 1 / 32 / 128), then issue 8's
# step_ablate at 128K batch 1 (Qwen3-8B, then Qwen3-4B if time is left), all with this tree's kernel.
set -u
T="$(date +%Y-%m-%d)_s36b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s36
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
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
