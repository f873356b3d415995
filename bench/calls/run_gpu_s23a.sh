#!/bin/bash
# Twenty-third session, for the first device call after run_gpu_s22b.sh (any tree: main, or main with branch
# fused-rotation-mma merged). One GPU, < 10 min, carry [".whl", ".kcache"]. Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s23a.sh
# Issue 8's throughput at equal KV memory (40 GiB at 32K; 5.03x BF16 for the 8B in the twenty-first session, target
# 6x): where OSCAR's step goes at its batch (replay ms with the append / decode switched off), BF16's step without
# attention at that batch, and the bound: the best ratio those leave and the share of copy bandwidth OSCAR's KV part
# needs for 6x (bench/step_ablate.py --equal-memory; BF16 full = the faster of cuDNN SDPA and FlashInfer since the
# twenty-fourth session). Qwen3-8B, then Qwen3-4B with the time left.
set -u
T="$(date +%Y-%m-%d)_s23a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s23
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for m in qwen3-8b qwen3-4b; do
  timeout $(( $(left) - 5 )) python3 bench/step_ablate.py --model $m --context 32768 --equal-memory \
    --out "$OUT/${T}_eq_ablate_$m.json" > "$OUT/${T}_eq_ablate_$m.log" 2>&1
  t "equal-memory ablation $m rc=$?"; grep -E "equal memory|oscar |bf16 |OSCAR:|BOUND|rror" "$OUT/${T}_eq_ablate_$m.log" | cut -c1-260
done
