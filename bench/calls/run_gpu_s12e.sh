#!/bin/bash
# Twelfth session, device call E, < 6 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s12e.sh
# Variant 10 (8 warps, clusters of 16 CTAs merged through distributed shared memory): at batch 1 the same
# 2 + 14 splits as variant 4's plan at 16K-64K, without the global partials' round trips. GPU tests of all
# variants (GQA 1/2/4/8 x head_dim 64/128, cluster merge), then variant 4 vs 10 at the batch-1 points, twice.
# Ran at b8f1baf; variant 10 was slower everywhere and is gone (bench/results/2026-12-04_s12e_variant10.patch).
set -u
T="$(date +%Y-%m-%d)_s12e"
source bench/gpu_env.sh
timeout 200 python3 -m pytest -q tests/kernels/test_cuda_kernels.py -k "gqa_and_head_dims or cluster_merge" \
  > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -5 | cut -c1-300
for r in 1 2; do
timeout 100 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --no-flashinfer \
  --contexts 4096 --batches 1 --sweep --sweep-points 4096x1,16384x1,32768x1,65536x1,131072x1 --sweep-variants 4,10 \
  --sweep-scales 1.0 --out "$OUT/${T}_sweep$r.json" > "$OUT/${T}_sweep$r.log" 2>&1
t "sweep $r rc=$?"; grep -E "^sweep" "$OUT/${T}_sweep$r.log" | cut -c1-200
done
