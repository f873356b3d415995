#!/bin/bash
# Prepared in the thirty-sixth session, run in the thirty-seventh. Any card, one GPU, < 10 min, carry
# [".whl", ".kcache"] (the library of the tree with the poll merge's shared lambdas, the thirty-seventh session's
# first commit, is prebuilt in .kcache as 08397414c61c8ff5; any .cu change needs a rebuild first: docs/KERNELS.md,
# "Build"):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s37.sh
# With the decode ring at shared-address phase 0 (thirty-sixth session, 5-11% faster on the H100), in one call:
# 1. the kernel GPU tests (they cover the poll merge's hoisted opart_at / addw: the s36 review's item);
# 2. the plan's variant choice re-checked: variants 0 / 1 / 4 / 5 / 6 / 7 / 10 / 11 at their planned splits at the
#    points where the plan switches (cuda_ops._default_variant dates from the misaligned ring);
# 3. on an H200 (no phase-0 figures yet): issue 7's rows with every peer, then step_ablate of both models;
#    on an H100 (rows and ablations measured in call s36b): equal-memory throughput of Qwen3-4B, then Qwen3-8B.
set -u
T="$(date +%Y-%m-%d)_s37"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s37
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log"
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
  --sweep --sweep-variants 0,1,4,5,6,7,10,11 --sweep-scales 1.0 \
  --sweep-points 131072x1,32768x1,16384x8,65536x8,32768x32,131072x32 > "$OUT/${T}_variants.log" 2>&1
t "variant sweep rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_variants.log" | cut -c1-110
if echo "$CARD" | grep -q H200; then
  issue7_rows 131072 1,32 128k
  issue7_rows 32768 1,32,128 32k
  for m in qwen3-8b qwen3-4b; do
    [ $(left) -lt 150 ] && break
    ablate_128k $m
  done
else
  for m in qwen3-4b qwen3-8b; do
    [ $(left) -lt 130 ] && break
    eq_memory $m
  done
fi
