#!/bin/bash
# Thirteenth session, device call A, < 9 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s13a.sh
# (1) the kernel tests after the merge change (relaxed arrival atomic, partial slots that mark themselves
# written); (2) end-of-call A/B, same process set-up, interleaved old / new / old / new: the previous kernel
# (bench/_old_int2_paged.cu = main 534a160's .cu, its library prebuilt in .kcache) against the new one at the
# batch-1 target points (diag) and at batch 32; (3) split sweep at head_dim 64 (the split model's constants
# were fitted at head_dim 128 only).
set -u
T="$(date +%Y-%m-%d)_s13a"
source bench/gpu_env.sh
timeout 240 python3 -m pytest -q tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -8 | cut -c1-300
mkdir -p /tmp/old && cp -r src /tmp/old/ && cp bench/_old_int2_paged.cu /tmp/old/src/oscarkv/kernels/cuda/int2_paged.cu
for r in 1 2; do
  for w in old new; do
    P=$PWD/src; [ $w = old ] && P=/tmp/old/src
    PYTHONPATH=/tmp/site:$P timeout 80 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append \
      --no-flashinfer --contexts 32768,131072 --batches 1,32 --diag 131072x1:4,32768x1:4 \
      --out "$OUT/${T}_ab_${w}${r}.json" > "$OUT/${T}_ab_${w}${r}.log" 2>&1
    t "A/B $w $r rc=$?"; grep -E "^diag|^L=" "$OUT/${T}_ab_${w}${r}.log" | cut -c1-330
  done
done
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --no-flashinfer --head-dim 64 \
  --contexts 32768 --batches 1 --sweep --sweep-points 131072x1,32768x1,131072x32,16384x8 --sweep-variants 0,4 \
  --sweep-scales 0.5,0.75,1.0,1.5 --out "$OUT/${T}_sweep_d64.json" > "$OUT/${T}_sweep_d64.log" 2>&1
t "sweep d64 rc=$?"; grep -iE "sweep|best|^L=" "$OUT/${T}_sweep_d64.log" | cut -c1-250 | head -40
