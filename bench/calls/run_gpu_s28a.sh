#!/bin/bash
# Twenty-seventh session, for the next device call (main with the padded-page fix). One GPU, < 10 min, carry
# [".whl", ".kcache"] (.kcache: 578425ff6d544de1, this tree's library):
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s28a.sh
# Why: with the fix the Qwen3-8B step at equal memory (40 GiB, 32K, batch 59) is 5.98-6.00x BF16 and the 4B's 5.87x
# (H100, run_gpu_s27a.sh); at 128K batch 1 the 8B is at 84.4% of the ideal. 1. the decode kernel's variants and split
# counts at the equal-memory point (32K batch 59: the default rule, fitted on the H200, picks the paired variant 10
# there) and at 128K batch 1: is there a faster plan on this card? 2. where the 8B's 128K batch-1 step goes now
# (the ablation's append was 0.366 ms with the padded pages); 3. the same at equal memory (8B).
set -u
T="$(date +%Y-%m-%d)_s28a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s28
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 90 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
  --sweep --sweep-variants 0,4,10,11 --sweep-scales 0.5,0.75,1.0,1.5,2.0 --sweep-points 32768x59,131072x1 \
  --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_sweep.log" | cut -c1-110
timeout 200 python3 bench/step_ablate.py --model qwen3-8b --context 131072 --bf16-backends CUDNN_ATTENTION \
  --out "$OUT/${T}_ablate_8b.json" > "$OUT/${T}_ablate_8b.log" 2>&1
t "ablate 8B 128K rc=$?"; grep -E "oscar |bf16 |OSCAR:|BOUND|rror" "$OUT/${T}_ablate_8b.log" | cut -c1-220
timeout $(( $(left) - 3 )) python3 bench/step_ablate.py --model qwen3-8b --context 32768 --equal-memory \
  --bf16-backends CUDNN_ATTENTION --out "$OUT/${T}_eq_ablate_8b.json" > "$OUT/${T}_eq_ablate_8b.log" 2>&1
t "equal-memory ablation 8B rc=$?"; grep -E "equal memory|oscar |bf16 |OSCAR:|BOUND|rror" "$OUT/${T}_eq_ablate_8b.log" | cut -c1-260
