#!/bin/bash
# Ninth session, device call D (issue 7), ~3 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s9d.sh
# The kernel as kept (main: L2 evict-first on the INT2 records by default; the TMA / register-ring load paths and
# head-major records removed again). GPU kernel tests, then the decode table (32K / 128K, batch 1 / 32) against
# FlashInfer BF16 / FP8 and cuDNN SDPA, copy bandwidth measured in the same run.
set -u
T="$(date +%Y-%m-%d)_s9d"
source bench/gpu_env.sh
timeout 120 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -4
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append \
  --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|Error" "$OUT/${T}_table.log" | cut -c1-300
