#!/bin/bash
# Twenty-fifth session, for the next device call (main with branch fused-rotation-mma merged, 11728a5 or later).
# One GPU, < 10 min, carry [".whl", ".kcache", "bench/alt_tree"]: bench/alt_tree is the tree before the merge (make
# it with `git archive eaa4db0 src $(git ls-tree --name-only eaa4db0 bench/ | grep '\.py$') | tar -x -C bench/alt_tree`;
# git-ignored). Why a whole tree: run_gpu_s25a.sh's A/B (main's .cu through this tree's Python) failed at load, since
# the merge grew the append's parameter struct (cuda_ops checks its size against the library). Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s25b.sh
# 1. the decode kernel, merged tree vs the tree before (paired loop 124 vs 130 SASS per tile, conflict-free epilogue),
#    alternating, variants 4 and 10 at 128K / 32K, batch 1 / 32, same card;
# 2. issue 7's table at 32K / 128K, batch 1 / 32, with the BF16 and FP8 peers and copy bandwidth in the same run;
# 3. issue 8's Qwen3-8B 128K step ablation (full, no append, no decode; the bound) with R_K fused into the append.
set -u
T="$(date +%Y-%m-%d)_s25b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s25
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
SW=(--pdl 1 --early-reads 1 --contexts= --no-flashinfer --no-triton --no-append --sweep --sweep-variants 4,10
  --sweep-scales 1.0 --sweep-points 131072x1,32768x1,131072x32,32768x32)
for r in 1 2; do
  for which in merged before; do
    D=.; C=$OSCARKV_COMMIT; [ $which = before ] && D=bench/alt_tree C=eaa4db0
    (cd $D && OSCARKV_COMMIT=$C PYTHONPATH=/tmp/site:$PWD/src timeout 45 python3 bench/bench_decode.py "${SW[@]}" \
      --out "$OUT/${T}_sweep_${which}$r.json" > "$OUT/${T}_sweep_${which}$r.log" 2>&1)
    t "sweep $which $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_sweep_${which}$r.log" | cut -c1-120
  done
done
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts 32768,131072 --batches 1,32 --no-triton \
  --out "$OUT/${T}_decode.json" > "$OUT/${T}_decode.log" 2>&1
t "decode table rc=$?"; grep -E "^copy|^L=|rror" "$OUT/${T}_decode.log" | cut -c1-200 | head -30
timeout $(( $(left) - 5 )) python3 bench/step_ablate.py --model qwen3-8b --context 131072 --bf16-backends CUDNN_ATTENTION \
  --out "$OUT/${T}_ablate_8b.json" > "$OUT/${T}_ablate_8b.log" 2>&1
t "ablate 8B rc=$?"; grep -E "oscar |bf16 |OSCAR:|BOUND|bound|rror" "$OUT/${T}_ablate_8b.log" | cut -c1-220
