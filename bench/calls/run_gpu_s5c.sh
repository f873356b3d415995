#!/bin/bash
# Fifth session, device call C (issues 7, 8), < 10 min on one H200, from the repo root, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s5c.sh
# 1. Kernel tests (probes 4 / 5 added; the kernel's normal path is unchanged).
# 2. Fixed-cost bisection at 128K / 32K batch 1: prologue only, no epilogue, no merge, launch only.
# 3. Issue 8 "done when": transformers' model.generate on the paged INT2 cache of the random-weight Qwen3-8B at
#    128K context, and the same through the reference backend: logits compared step by step.
set -u
T="$(date +%Y-%m-%d)_s5c"
source bench/gpu_env.sh
timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log"
timeout 100 python3 bench/bench_decode.py --no-flashinfer --no-triton --no-append --contexts 131072 --batches 1 \
  --diag 131072x1:4,32768x1:4 --out "$OUT/${T}_diag.json" > "$OUT/${T}_diag.log" 2>&1
t "diag rc=$?"; grep -E "^diag|^L=|copy band" "$OUT/${T}_diag.log" | cut -c1-900
timeout 300 python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --steps 5 --out "$OUT/${T}_generate_8b_128k.json" > "$OUT/${T}_generate_8b_128k.log" 2>&1
t "generate rc=$?"; grep -E "generate at|Error|error" "$OUT/${T}_generate_8b_128k.log" | cut -c1-1500
