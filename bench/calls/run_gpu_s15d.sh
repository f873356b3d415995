#!/bin/bash
# Fifteenth session, device call d (< 6 min on one H200), carry [".whl", ".kcache"]:   bash bench/calls/run_gpu_s15d.sh
# After call c: the cluster variants keep sequence-major dispatch (call c's 18 failures: split-major broke their
# one-cluster-per-(sequence, KV head) mapping), and the per-sequence split tables are capped at the plan's counts
# (call c: the BF16-tier table grew the 32K batch-1 grid to 3 + 14 splits, 15.9 us against 14.4). (1) the CUDA
# kernel tests; (2) the capacity plans of call a; (3) our kernel alone at batch 1 / 8 / 32; (4) the paged-cache
# GPU tests.
set -u
T="$(date +%Y-%m-%d)_s15d"
source bench/gpu_env.sh
timeout 70 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -4 | cut -c1-300
timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts "" --capacity-plan 4096x1:131072,32768x1:131072,131072x1:131072,4096x8:131072,32768x8:131072,4096x32:131072,32768x32:131072,131072x32:131072 \
  --out "$OUT/${T}_capacity.json" > "$OUT/${T}_capacity.log" 2>&1
t "capacity rc=$?"; grep -E "^capacity|Error" "$OUT/${T}_capacity.log" | cut -c1-330
timeout 110 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --batches 1,8,32 --out "$OUT/${T}_ours.json" > "$OUT/${T}_ours.log" 2>&1
t "ours rc=$?"; grep -E "^L=" "$OUT/${T}_ours.log" | cut -c1-75
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  > "$OUT/${T}_cache_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_cache_tests.log" | tail -3
