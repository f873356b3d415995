#!/bin/bash
# Prepared in the fortieth session for the next one (not yet run). Any card, one GPU, < 10 min, carry
# [".whl", ".kcache"] (the tree's library prebuilt into .kcache on the CPU machine: docs/KERNELS.md, "Build"):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s41.sh
# 1. The filled-slots plan (CudaDecodeConfig.fill_tiles; merged in the fortieth session after its split-table fix,
#    which no GPU has run): issue 7's batch-1 rows at 32K, 48K, 64K (and 32K at head_dim 64), every peer in the same
#    run, the old plan's 2 + 14 as ours_alt. Expected from the sweeps: the plan's 2 + 31 0.1-1.6 us faster than
#    2 + 14; if it is slower, the plan path still differs from the sweeps' explicit counts: look at DecodePlan's
#    split_lut / hp_lut before anything else.
# 2. Issue 8's batch-1 step at 32K and 64K (Qwen3-8B, compiled, graph replay; BF16 with cuDNN SDPA), which the
#    filled slots change, if time is left.
# 3. On an H200 (it has not run the rule; its twelfth-session sweep of an older kernel had 2 + 14 faster at 32K):
#    the same rows, and a three-round sweep 2 + 14 against 2 + 31 at 32K / 64K batch 1 (variant 4, the H200's rule).
set -u
T="$(date +%Y-%m-%d)_s41"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s41
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
issue7_rows 32768 1 32k "--alt-splits 32768x1=2+14"
issue7_rows 65536 1 64k "--alt-splits 65536x1=2+14"
issue7_rows 49152 1 48k "--alt-splits 49152x1=2+14"
[ $(left) -ge 60 ] && issue7_rows 32768 1 32k_d64 "--head-dim 64 --alt-splits 32768x1=2+14"
if echo "$CARD" | grep -q H200; then
  for r in 1 2 3; do
    [ $(left) -ge 60 ] && variant_sweep "" 4 v4_r$r 30 "--sweep-splits 32768x1=2+14,32768x1=2+31,65536x1=2+14,65536x1=2+31"
  done
fi
if [ $(left) -ge 200 ]; then
  timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models qwen3-8b --contexts 32768,65536 --modes compiled \
    --tput-context 0 --fuse-projections --steps 20 --compiled-bf16-backends CUDNN_ATTENTION \
    --out "$OUT/${T}_model_8b.json" > "$OUT/${T}_model_8b.log" 2>&1
  t "bench_model 8B rc=$?"; grep -E "ms|speedup|rror" "$OUT/${T}_model_8b.log" | tail -8 | cut -c1-250
fi
