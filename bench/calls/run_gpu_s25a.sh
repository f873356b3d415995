#!/bin/bash
# Twenty-fifth session, branch fused-rotation-mma (58a107b): the twenty-second session's run_gpu_s22b.sh (never run;
# removed, its 8B step ablation moved to run_gpu_s25b.sh) without that ablation (the session's device time was short),
# i.e. the branch's validation before it is merged:
# 1. the kernel GPU suite; 2. the decode kernel against main's in the same call, alternating (variants 4 and 10 at
# 128K / 32K, batch 1 / 32); 3. the append with R_K fused vs rotate_with_keys + plain append; 4. the paged-cache GPU
# tests (generate through the fused path against the references).
# One GPU, < 10 min, carry [".whl", ".kcache", "bench/alt_int2_paged_main.cu"]. Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s25a.sh
set -u
T="$(date +%Y-%m-%d)_s25a"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_kernel_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^E  |FAILED|passed|failed|rror" "$OUT/${T}_kernel_tests.log" | tail -8 | cut -c1-300
SW=(--pdl 1 --early-reads 1 --contexts= --no-flashinfer --no-triton --no-append --sweep --sweep-variants 4,10
  --sweep-scales 1.0 --sweep-points 131072x1,32768x1,131072x32,32768x32)
for r in 1 2; do
  for which in branch main; do
    ALT=""; [ $which = main ] && ALT=bench/alt_int2_paged_main.cu
    OSCARKV_KERNEL_SRC=$ALT timeout 45 python3 bench/bench_decode.py "${SW[@]}" --out "$OUT/${T}_sweep_${which}$r.json" \
      > "$OUT/${T}_sweep_${which}$r.log" 2>&1
    t "sweep $which $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_sweep_${which}$r.log" | cut -c1-120
  done
done
timeout 60 python3 bench/bench_decode.py --pdl 1 --contexts "" --no-flashinfer --no-triton --append-batches 1,32,256 \
  --append-rotation fused,gemm --out "$OUT/${T}_append.json" > "$OUT/${T}_append.log" 2>&1
t "append rc=$?"; grep -E "^append|rror" "$OUT/${T}_append.log" | cut -c1-200
timeout $(( $(left) - 5 )) python3 -m pytest -q -s -p no:cacheprovider tests/cache/test_gpu_paged.py \
  > "$OUT/${T}_cache_tests.log" 2>&1
t "paged tests rc=$?"; grep -E "^FAILED|passed|failed|padded|^E  " "$OUT/${T}_cache_tests.log" | tail -8 | cut -c1-250
