#!/bin/bash
# Eighth session, device call C (issue 7), < 4 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s8c.sh
# Call B cut the loop's instructions by ~10% (variant 15: 159 SASS per tile against 173) and gained ~1%: so what
# binds the loop? Kernel probes at 128K batch 32 and batch 1: 1 = INT2 loads only, 6 = everything but the code
# unpack (the MMAs take the raw words; the unpack is 64 of the loop's ~86 ALU-pipe instructions per tile).
set -u
T="$(date +%Y-%m-%d)_s8c"
source bench/gpu_env.sh
timeout 100 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py -k "experimental or gqa_and_head_dims" > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -4
timeout 200 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --probe --probe-points 131072x32,131072x1,32768x59 --probe-variants 0,15,4,16 \
  --probe-modes 1,6 --out "$OUT/${T}_probe.json" > "$OUT/${T}_probe.log" 2>&1
t "probe rc=$?"; grep -E "^probe|Error" "$OUT/${T}_probe.log" | cut -c1-250
