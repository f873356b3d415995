#!/bin/bash
# (As run at 3b3d761, the ring slots at whole lines; reverted after this call: log8 at 128K b1 unchanged, 33.6-33.7 us.)
# Forty-ninth session, second call (one GPU, < 10 min, carry [".whl", ".kcache"]; .kcache: the library built on
# the CPU machine from this tree's int2_paged.cu):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s49b.sh
# The decode ring's slots at whole 128-byte lines (log8 records of 8 D + 64 bytes put every other slot at phase 64;
# fp16 records are whole lines, so their instantiations are unchanged):
# 1. the log8 GPU tests (kernels, the CUDA-graph paged cache) and the vLLM backend's GPU test (log8 pages read by
#    the CUDA kernel);
# 2. issue 7's headline rows with every peer, ours on fp16 and log8 records in the same run, twice;
# 3. log8 variants at 128K batch 1 and 32;
# 4. with what is left, the vLLM backend's whole GPU test and the kernel tests (regression).
set -u
T="$(date +%Y-%m-%d)_s49b"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py \
  tests/vllm/test_gpu_vllm_shapes.py -k log8 -rs > "$OUT/${T}_tests_log8.log" 2>&1
t "log8 tests rc=$?"; tail -1 "$OUT/${T}_tests_log8.log"; grep -E "^FAILED|^SKIPPED|Error" "$OUT/${T}_tests_log8.log" | head -8
for tag in key again; do
  [ $(left) -gt 150 ] || break
  timeout 140 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 131072,32768 \
    --batches 32,1 --also-log8 --out "$OUT/${T}_$tag.json" > "$OUT/${T}_$tag.log" 2>&1
  t "$tag rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_$tag.log" | cut -c1-420
done
[ $(left) -gt 110 ] && variant_sweep 131072x1,131072x32 4,7,11 var_log8 70 "--scale-dtype log8"
[ $(left) -gt 60 ] && { timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider tests/vllm/test_gpu_vllm_shapes.py \
  tests/kernels/test_cuda_kernels.py -k "not log8" -x > "$OUT/${T}_tests_rest.log" 2>&1; t "other tests rc=$?";
  tail -1 "$OUT/${T}_tests_rest.log"; grep -E "^FAILED" "$OUT/${T}_tests_rest.log" | head -5; }
t done
