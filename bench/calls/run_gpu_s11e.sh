#!/bin/bash
# Eleventh session, device call E, < 5 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s11e.sh
# The final kernel (int8 q made NaN / inf-sticky): every GPU test of the package (kernels, paged cache,
# compiled decode step, NaN propagation) and the four target points of the decode table.
set -u
T="$(date +%Y-%m-%d)_s11e"
source bench/gpu_env.sh
timeout 300 python3 -m pytest -q tests/kernels tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  tests/adversarial > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -8 | cut -c1-300
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append \
  --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|accuracy|Error" "$OUT/${T}_table.log" | cut -c1-300
