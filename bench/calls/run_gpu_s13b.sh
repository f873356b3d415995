#!/bin/bash
# Thirteenth session, device call B, < 6 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s13b.sh
# (1) the kernel tests with the new merge-state test (main's kernel; the relaxed-arrival merge of call A was
# slower and is not in the tree); (2) the whole decode table with every peer (FlashInfer BF16 / FP8, cuDNN,
# flash SDPA) on this machine: call A measured 128K batch 32 at 750 us, against 833 us in the twelfth session.
set -u
T="$(date +%Y-%m-%d)_s13b"
source bench/gpu_env.sh
timeout 120 python3 -m pytest -q tests/kernels/test_cuda_kernels.py -k "merge_state or many_splits or in_a_cuda_graph" \
  > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -5 | cut -c1-300
timeout 390 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --append-batches 1,256 \
  --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|accuracy|Error|append" "$OUT/${T}_table.log" | cut -c1-330
