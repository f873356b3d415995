#!/bin/bash
# Twelfth session, device call C, < 9 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s12c.sh
# The per-SM split model (cuda_ops._choose_int2_splits, fitted to calls A / B): the decode table (4K-128K x batch
# 1-128, FlashInfer BF16 / FP8, cuDNN / flash SDPA, copy bandwidth) with our kernel at the new split counts and,
# in the same run, at the eleventh session's split counts (--alt-splits: the old model's choices); the kernel and
# paged-cache GPU tests (the planner feeds every call).
set -u
T="$(date +%Y-%m-%d)_s12c"
source bench/gpu_env.sh
OLD=4096x1=3+10,4096x8=5+3,4096x32=3+3,4096x128=1+2,16384x1=3+21,16384x8=5+11,16384x32=3+5,16384x128=1+3,32768x1=2+29,32768x8=3+5,32768x32=3+7,32768x128=1+5,65536x1=2+31,65536x8=3+13,65536x32=3+11,65536x128=1+6,131072x1=2+31,131072x8=3+13,131072x32=3+15,131072x128=1+16
timeout 390 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --append-batches 1,256 --alt-splits "$OLD" \
  --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|accuracy|Error|append" "$OUT/${T}_table.log" | cut -c1-330
timeout 150 python3 -m pytest -q -x tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -5 | cut -c1-300
