#!/bin/bash
# Sixth session, device call C (issue 7), < 10 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s6c.sh
# The decode kernel reading tile16 records (one address per tile, 176 instead of 185 SASS instructions per
# tile): GPU tests, the table against cuDNN / flash / FlashInfer BF16 / FP8 (PDL), fixed-cost diag, loads only.
set -u
T="$(date +%Y-%m-%d)_s6c"
source bench/gpu_env.sh
timeout 120 python3 -m pytest -q -x -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|Error|128K rel" "$OUT/${T}_tests.log" | tail -6
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/adversarial/test_nan_propagates.py \
  >> "$OUT/${T}_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -2
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append \
  --contexts 4096,32768,131072 --batches 1,32 --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|Error" "$OUT/${T}_table.log" | cut -c1-300
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 131072 --batches 1 --diag 131072x1:4,32768x1:4 --probe --probe-points 131072x1,131072x32 \
  --probe-variants 4,0 --out "$OUT/${T}_diag.json" > "$OUT/${T}_diag.log" 2>&1
t "diag rc=$?"; grep -E "^diag|^probe|Error" "$OUT/${T}_diag.log" | cut -c1-400
