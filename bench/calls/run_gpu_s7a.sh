#!/bin/bash
# Seventh session, device call A (issues 7, 8), < 10 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s7a.sh
# Software-pipelined INT2 loop (variants 10-12: tile k + 1's scores issued before tile k's softmax and
# output): GPU tests of every variant, a variant sweep at batch 1 / 8 / 32 / 128 (PDL + early reads, as the
# paged cache runs it), and the Qwen3-4B 128K batch-1 model step with the record kernel.
set -u
T="$(date +%Y-%m-%d)_s7a"
source bench/gpu_env.sh
timeout 150 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|128K rel" "$OUT/${T}_tests.log" | tail -8
timeout 240 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 \
  --sweep --sweep-points 131072x1,32768x1,4096x1,131072x8,131072x32,32768x32,16384x128 \
  --sweep-variants 4,0,10,11,12 --sweep-scales 1.0 \
  --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep|^L=|Error" "$OUT/${T}_sweep.log" | cut -c1-300
timeout 170 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled --tput-context 0 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_4b.json" > "$OUT/${T}_bench_model_4b.log" 2>&1
t "4b rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_4b.log" | cut -c1-300 | tail -4
