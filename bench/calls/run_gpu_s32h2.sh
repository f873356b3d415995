#!/bin/bash
# Thirty-second session, second call on a warm H200 (after run_gpu_s32.sh found one). One GPU, < 10 min, carry
# [".whl", ".kcache"].   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s32h2.sh
# Issue 8's 90% at 128K batch 1 has a measured bound on the H100 (4B 89.2%, call s31e); on the H200 none since the
# twenty-sixth session's kernels: step_ablate for both models (BF16's step without attention + OSCAR's KV bytes at the
# run's copy bandwidth = the best any OSCAR kernel can give).
set -u
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
T="$(date +%Y-%m-%d)_s32h2"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s32
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for m in qwen3-4b qwen3-8b; do
  [ $(left) -lt 150 ] && break
  timeout $(( $(left) - 5 )) python3 bench/step_ablate.py --model $m --context 131072 --bf16-backends CUDNN_ATTENTION \
    --out "$OUT/${T}_ablate_$m.json" > "$OUT/${T}_ablate_$m.log" 2>&1
  t "ablate $m 128K rc=$?"; tail -12 "$OUT/${T}_ablate_$m.log" | cut -c1-200
done
