#!/bin/bash
# Twenty-eighth session, branch page-graphs: one CUDA graph per page-view bucket of the decode step (PagedState.
# page_buckets), so a step without a demotion launches no null-page CTAs (on an H200 the append at batch 59 with the
# R_K rotation took 18.95 us per step unpadded and 25.14 padded to one page per row, run_gpu_s28b). One GPU,
# < 10 min, carry [".whl", ".kcache", "bench/alt_tree"]: bench/alt_tree is main before the branch (`git archive
# 45e83a7 src $(git ls-tree --name-only 45e83a7 bench/ | grep '\.py$') bench/configs | tar -x -C bench/alt_tree`;
# git-ignored; the same kernel source, .kcache 578425ff6d544de1). Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s28c.sh
# 1. the paged-cache GPU tests (the new per-bucket graph test among them) and the compiled-step test;
# 2. equal KV memory (40 GiB, 32K, BF16 cuDNN in each run), Qwen3-8B then Qwen3-4B, this branch then main, same card.
set -u
T="$(date +%Y-%m-%d)_s28c"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s28
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; tail -3 "$OUT/${T}_tests.log" | cut -c1-300; grep -E "bucket" "$OUT/${T}_tests.log" | cut -c1-200
for m in qwen3-8b qwen3-4b; do
  for which in branch main; do
    [ $(left) -lt 70 ] && break 2
    D=.; C=$OSCARKV_COMMIT; [ $which = main ] && D=bench/alt_tree C=45e83a7
    (cd $D && OSCARKV_COMMIT=$C PYTHONPATH=/tmp/site:$PWD/src timeout $(( $(left) - 5 )) python3 bench/bench_model.py \
      --models $m --contexts "" --modes compiled --tput-context 32768 --fuse-projections --steps 32 \
      --compiled-bf16-backends CUDNN_ATTENTION --out "$OUT/${T}_eq_${m}_$which.json" > "$OUT/${T}_eq_${m}_$which.log" 2>&1)
    t "equal memory $m $which rc=$?"; grep -E "equal|Error|error" "$OUT/${T}_eq_${m}_$which.log" | cut -c1-260
  done
done
