#!/bin/bash
# Eleventh session, device call D (issue 7), < 10 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s11d.sh
# The whole decode table of issue 7 with the u8-K kernel (contexts 4K-128K, batches 1, 8, 32, 128 where BF16
# fits in 40 GB; FlashInfer BF16 / FP8, cuDNN and flash SDPA in the same run) and the append / demotion cost.
set -u
T="$(date +%Y-%m-%d)_s11d"
source bench/gpu_env.sh
timeout 560 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton \
  --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|append|Error" "$OUT/${T}_table.log" | cut -c1-300
