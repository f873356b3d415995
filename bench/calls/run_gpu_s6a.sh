#!/bin/bash
# Sixth session, device call A (issue 7 / 8), < 10 min on one H200, from the repo root with branch cluster-merge
# merged; carry [".whl", ".kcache"] (kernel library prebuilt on the CPU machine):
#   bash bench/calls/run_gpu_s6a.sh
# 1. GPU kernel tests, incl. the cluster variants 8 / 9 (written without a GPU in the fifth session).
# 2. Read floor (the measured bound): a bare one-launch read of the INT2 bytes of 4K / 32K / 128K batch 1 and
#    128K batch 32, then the batch-1 fixed cost and timing of variants 4 / 8 / 9 (PDL + early reads).
# 3. The table at 32K / 128K, batch 1 / 32 against cuDNN, flash, FlashInfer BF16 and FP8 (PDL on).
# 4. Qwen3-8B 128K: paged generate vs the exact fp32 reference (bench_model --generate-refs reference_exact).
set -u
T="$(date +%Y-%m-%d)_s6a"
source bench/gpu_env.sh
timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|Error" "$OUT/${T}_tests.log" | tail -4
timeout 170 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 131072 --batches 1 --read-floor 4096x1,32768x1,131072x1,131072x32 \
  --diag 131072x1:4,131072x1:8,131072x1:9,32768x1:4,32768x1:8,32768x1:9 \
  --sweep --sweep-points 131072x1,32768x1,4096x1,131072x32 --sweep-variants 4,8,9 --sweep-scales 1.0 \
  --out "$OUT/${T}_cluster.json" > "$OUT/${T}_cluster.log" 2>&1
t "cluster rc=$?"; grep -E "^read floor|^diag|^sweep|^L=|Error" "$OUT/${T}_cluster.log" | cut -c1-420
timeout 120 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append \
  --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|Error" "$OUT/${T}_table.log" | cut -c1-300
timeout 170 python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --generate-refs reference_exact --steps 5 --out "$OUT/${T}_generate_exact.json" \
  > "$OUT/${T}_generate_exact.log" 2>&1
t "generate rc=$?"; grep -E "generate at|Error" "$OUT/${T}_generate_exact.log" | cut -c1-1200
