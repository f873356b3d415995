#!/bin/bash
# Forty-eighth session, one GPU (H100 or H200), < 10 min, carry [".whl", ".kcache"] (.kcache: the library built on the
# CPU machine from this tree's int2_paged.cu, so no nvcc time here):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s48.sh
# The log8 record format (QuantConfig(scale_dtype="log8"): one byte of scale and one of zero per token and KV head,
# records of 8 d + 64 bytes instead of 8 d + 128; 5.6% fewer bytes at head_dim 128). Most important first:
# 1. the log8 GPU tests (append bit for bit against the torch reference, decode against the float64 reference for
#    variants 0 / 4 / 7 / 8 / 10 / 11, GQA 1 / 4 / 8, head_dim 64 / 128, NaN rows);
# 2. issue 7's headline rows (128K b1 / b32, 32K b1 / b32) with every peer, ours on fp16 records and on log8 records
#    (column ours_log8) in the same run;
# 3. the variants on log8 records at 128K b32 / b1 (the format's extra instructions may move the best one);
# 4. the fp16 kernel tests (a regression check of the template change) with what is left.
set -u
T="$(date +%Y-%m-%d)_s48"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py -k log8 -x \
  > "$OUT/${T}_tests_log8.log" 2>&1
t "log8 tests rc=$?"; tail -1 "$OUT/${T}_tests_log8.log"; grep -E "^FAILED|Error|assert" "$OUT/${T}_tests_log8.log" | head -8
K=$(( $(left) - 60 )); [ $K -gt 300 ] && K=300
timeout $K python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 131072,32768 \
  --batches 32,1 --also-log8 --out "$OUT/${T}_key.json" > "$OUT/${T}_key.log" 2>&1
t "key rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_key.log" | cut -c1-420
[ $(left) -gt 150 ] && variant_sweep 131072x32,131072x1 0,4,7,10,11 var_log8 60 "--scale-dtype log8"
[ $(left) -gt 40 ] && { timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_cuda_kernels.py -k "not log8" > "$OUT/${T}_tests_fp16.log" 2>&1;
  t "fp16 tests rc=$?"; tail -1 "$OUT/${T}_tests_fp16.log"; grep -E "^FAILED" "$OUT/${T}_tests_fp16.log" | head -5; }
t done
