#!/bin/bash
# Fifteenth session, device call a (with bench/calls/run_gpu_energy.sh after it; 251 s on one H200), carry [".whl",
# ".kcache"], on commit c0d4aed (the fourteenth session's per-sequence split patch applied; merge_l1 was removed
# after this call: no faster):   bash bench/calls/run_gpu_s15a.sh; bash bench/calls/run_gpu_energy.sh
# Per-sequence BF16-tier + INT2 split tables with the split-major CTA order (CudaDecodeConfig.adaptive_splits):
# (1) the CUDA kernel tests (the capacity-plan test runs adaptive_splits=True / False), the paged-cache GPU tests;
# (2) plans for 128K at 4K / 32K / 128K, batch 1 / 8 / 32: own plan, default, adaptive, every split; (3) the merge's
# second round through L1 (CudaDecodeConfig.merge_l1) at 32K / 128K batch 1, interleaved A/B. Merge into main if
# (1) passes; make adaptive the default (None -> True) if (2) shows no point slower than every split; merge_l1 on
# if (3) is faster at 128K and no slower at 32K.
set -u
T="$(date +%Y-%m-%d)_next"
source bench/gpu_env.sh
timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -4 | cut -c1-300
timeout 90 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts "" --capacity-plan 4096x1:131072,32768x1:131072,131072x1:131072,4096x8:131072,32768x8:131072,4096x32:131072,32768x32:131072,131072x32:131072 \
  --out "$OUT/${T}_capacity.json" > "$OUT/${T}_capacity.log" 2>&1
t "capacity rc=$?"; grep -E "^capacity|copy bandwidth|Error" "$OUT/${T}_capacity.log" | cut -c1-330
for m in 0 1 0 1; do  # the merge through L1 (CudaDecodeConfig.merge_l1), interleaved A/B at batch 1
  timeout 40 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
    --contexts 32768,131072 --batches 1 --merge-l1 $m --out "$OUT/${T}_merge_l1_$m.json" 2>&1 | grep -E "^L=" | cut -c1-60 \
    | sed "s/^/merge_l1=$m /"
done
t "merge_l1 A/B done"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  > "$OUT/${T}_cache_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_cache_tests.log" | tail -3
