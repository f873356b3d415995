#!/bin/bash
# For the next session (one GPU, < 10 min, carry [".whl", ".kcache"]; .kcache: the library built on the CPU machine
# from this tree's int2_paged.cu):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s49.sh
# 1. the log8 GPU tests not yet run on a GPU: the CUDA-graph paged cache on log8 records against the reference
#    (tests/cache/test_gpu_paged.py -k log8), then the kernel tests on log8 records;
# 2. issue 7's headline rows with every peer, ours on fp16 and log8 records in the same run (--also-log8), twice;
# 3. with what is left, the paged-cache GPU suite (regression).
set -u
T="$(date +%Y-%m-%d)_s49"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/kernels/test_cuda_kernels.py \
  -k log8 > "$OUT/${T}_tests_log8.log" 2>&1
t "log8 tests rc=$?"; tail -1 "$OUT/${T}_tests_log8.log"; grep -E "^FAILED|max_rel_logit" "$OUT/${T}_tests_log8.log" | head -8
for tag in key again; do
  [ $(left) -gt 150 ] || break
  timeout 140 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 131072,32768 \
    --batches 32,1 --also-log8 --out "$OUT/${T}_$tag.json" > "$OUT/${T}_$tag.log" 2>&1
  t "$tag rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_$tag.log" | cut -c1-420
done
[ $(left) -gt 60 ] && { timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py \
  -k "not log8" > "$OUT/${T}_tests_paged.log" 2>&1; t "paged tests rc=$?"; tail -1 "$OUT/${T}_tests_paged.log"; }
t done
