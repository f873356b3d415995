#!/bin/bash
# Fourteenth session, device call A (issues 7 / 8), < 150 s on one H200 (the session had 319 s of device time),
# carry [".whl", ".kcache"]:   bash bench/calls/run_gpu_s14a.sh
# Per-sequence INT2 split counts (CudaDecodeConfig.adaptive_splits, DecodeParams::split_lut): (1) the CUDA kernel
# tests that mix lengths and splits, with the new capacity-plan test; (2) a plan made for 128K run at 4K / 32K
# (batch 1, 32) with each sequence's own split count vs every split, beside the plan for the context itself;
# (3) the rest of the kernel tests (GQA x head_dim x variant matrix) in the time left.
set -u
T="$(date +%Y-%m-%d)_s14a"
source bench/gpu_env.sh
K="capacity_plan or many_splits or merge_state or randomized or early_reads or cluster_merge or cuda_graph or programmatic or nonfinite or 128k"
timeout 50 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py -k "$K" > "$OUT/${T}_tests1.log" 2>&1
t "kernel tests (mixed lengths, merges) rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests1.log" | tail -4 | cut -c1-300
timeout 40 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts "" --capacity-plan 4096x1:131072,32768x1:131072,4096x32:131072,32768x32:131072 \
  --out "$OUT/${T}_capacity.json" > "$OUT/${T}_capacity.log" 2>&1
t "capacity rc=$?"; grep -E "^capacity|copy bandwidth|Error" "$OUT/${T}_capacity.log" | cut -c1-300
timeout 40 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py -k "not ($K)" > "$OUT/${T}_tests2.log" 2>&1
t "kernel tests (the rest) rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests2.log" | tail -4 | cut -c1-300
tail -c 600 "$OUT/${T}_tests2.log"
