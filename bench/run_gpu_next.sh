#!/bin/bash
# Next session's first device call (issue 7), < 10 min on one H200, from the repo root of branch cluster-merge
# (`git merge cluster-merge` on main first: the fifth session wrote the cluster variants without a GPU and kept
# them off main until this script's tests pass; on main alone steps 1-2 fail for variants 8 / 9),
# carry [".whl", ".kcache"] (.kcache: `OSCARKV_KERNEL_CACHE=$PWD/.kcache python -c "from oscarkv.kernels import
# cuda_ops; cuda_ops.build()"` on the CPU machine, ~90 s):
#   bash bench/run_gpu_next.sh
# 1. GPU kernel tests incl. the cluster variants 8 / 9 (written without a GPU in the fifth session) and the
#    paged transformers path.
# 2. Batch-1 fixed cost and timing: variants 4 (today's default), 8 (16 warps, clusters of 16) and 9 (8 warps,
#    clusters of 8) with PDL and early reads, diag + sweep.
# 3. Qwen3-8B 128K: paged generate vs the exact fp32 reference (bench_model --generate-refs reference_exact).
set -u
T="$(date +%Y-%m-%d)_next"
source bench/gpu_env.sh
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|Error" "$OUT/${T}_tests.log" | tail -4
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/adversarial/test_nan_propagates.py \
  >> "$OUT/${T}_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -3
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 131072 --batches 1 --diag 131072x1:4,131072x1:8,131072x1:9,32768x1:4,32768x1:8,32768x1:9 \
  --sweep --sweep-points 131072x1,32768x1,4096x1,131072x2 --sweep-variants 4,8,9 --sweep-scales 1.0 \
  --out "$OUT/${T}_cluster.json" > "$OUT/${T}_cluster.log" 2>&1
t "cluster rc=$?"; grep -E "^diag|^sweep|^L=" "$OUT/${T}_cluster.log" | cut -c1-400
timeout 150 python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --generate-refs reference_exact --steps 5 --out "$OUT/${T}_generate_exact.json" \
  > "$OUT/${T}_generate_exact.log" 2>&1
t "generate rc=$?"; grep -E "generate at|Error" "$OUT/${T}_generate_exact.log" | cut -c1-1200
