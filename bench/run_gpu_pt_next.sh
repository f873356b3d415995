#!/bin/bash
# Branch paired-tiles (eighteenth session, no device then), not yet run. One H200, < 10 min, carry [".whl", ".kcache"]
# (.kcache: build this branch's kernel first, cuda_ops.build()):   bash bench/run_gpu_pt_next.sh
# Variants 10 / 11 (= 0 / 4 with tiles two at a time, group <= 4): 129 SASS instructions per tile on the hot path
# at head_dim 128 instead of 165. Every kernel test (the default variants' code was refactored too: read_words /
# read_scales / scores taking words, same semantics), then the paired variants against 0 / 4 at the planned splits.
# If the tests pass and 10 / 11 are faster, make them the default for group <= 4 (DecodePlan's variant rule).
set -u
T="$(date +%Y-%m-%d)_ptnext"
source bench/gpu_env.sh
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_kernel_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^E .*rel err|FAILED|passed|failed|rror" "$OUT/${T}_kernel_tests.log" | tail -8 | cut -c1-300
timeout 90 python3 -m pytest -q -s -p no:cacheprovider tests/cache/test_gpu_paged.py > "$OUT/${T}_paged_tests.log" 2>&1
t "paged tests rc=$?"; grep -E "passed|failed|FAILED" "$OUT/${T}_paged_tests.log" | tail -4 | cut -c1-200
timeout $(( 585 - $(date +%s) + T0 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
  --no-triton --no-append --sweep --sweep-points 131072x1,32768x1,8192x1,131072x32,32768x32,65536x8,32768x128 \
  --sweep-variants 0,10,4,11 --sweep-scales 1.0 --out "$OUT/${T}_sweep.json" > "$OUT/${T}_sweep.log" 2>&1
t "sweep rc=$?"; grep -v -i warn "$OUT/${T}_sweep.log" | tail -40 | cut -c1-200
