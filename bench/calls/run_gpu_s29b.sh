#!/bin/bash
# Twenty-eighth session, for the next device call, with branch rot-smem checked out. One GPU, < 10 min, carry
# [".whl", ".kcache", "bench/alt_int2_paged_main.cu"]: bench/alt_int2_paged_main.cu is main's kernel (`git show
# main:src/oscarkv/kernels/cuda/int2_paged.cu > bench/alt_int2_paged_main.cu`; git-ignored); .kcache holds both
# libraries (main 578425ff6d544de1 and the branch's, built here with cuda_ops.build()). Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s29b.sh
# Why: the append with R_K fused cost 18.95 us per step at batch 59 against 3.36 without the rotation (H200,
# run_gpu_s28b): its rotation CTAs loaded their X rows (new K rows and queries) from global memory two k-steps
# ahead of the MMAs, ~5 round trips per m-tile and 4 m-tiles in a row (SASS, twenty-eighth session). The branch
# stages X in shared memory with every load of the CTA in flight at once, R's loads beside them (one round trip),
# 32 columns per CTA (2 m-tiles, 64 registers, no spill). Each layer's decode waits for its append, so at batch 59
# this is on the step's critical path (36 layers).
# 1. the kernel GPU tests (append and rotation) and the paged-cache GPU tests with the branch's kernel;
# 2. the append microbenchmark, main's kernel vs the branch's, batch 1 / 59 / 256, R_K fused;
# 3. equal KV memory, Qwen3-4B then Qwen3-8B, branch vs main kernel (same Python), same card;
# 4. with the time left, Qwen3-8B at 128K batch 1 with the branch's kernel.
set -u
T="$(date +%Y-%m-%d)_s29b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s29
MAINSRC=$PWD/bench/alt_int2_paged_main.cu
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py \
  -k "append or rotat or graph or paged" > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; tail -2 "$OUT/${T}_tests.log" | cut -c1-300; grep -E "^FAILED|Error" "$OUT/${T}_tests.log" | head -5 | cut -c1-200
for which in branch main; do
  src=""; [ $which = main ] && src=$MAINSRC
  OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --contexts "" --no-flashinfer --no-triton \
    --append-batches 1,59,256 --append-rotation fused --out "$OUT/${T}_append_$which.json" > "$OUT/${T}_append_$which.log" 2>&1
  t "append $which rc=$?"; grep -E "append cuda.*fused|rror" "$OUT/${T}_append_$which.log" | cut -c1-150
done
EQ=(--contexts "" --modes compiled --tput-context 32768 --fuse-projections --steps 32 --compiled-bf16-backends CUDNN_ATTENTION)
for m in qwen3-4b qwen3-8b; do
  for which in branch main; do
    [ $(left) -lt 60 ] && break 2
    src=""; [ $which = main ] && src=$MAINSRC
    OSCARKV_KERNEL_SRC=$src timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models $m "${EQ[@]}" \
      --out "$OUT/${T}_eq_${m}_$which.json" > "$OUT/${T}_eq_${m}_$which.log" 2>&1
    t "equal memory $m $which rc=$?"; grep -E "equal|Error|error" "$OUT/${T}_eq_${m}_$which.log" | cut -c1-240
  done
done
[ $(left) -gt 120 ] && timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 \
  --modes compiled --tput-context 0 --fuse-projections --steps 20 --compiled-bf16-backends CUDNN_ATTENTION \
  --out "$OUT/${T}_128k_8b.json" > "$OUT/${T}_128k_8b.log" 2>&1 && t "128K 8B rc=$?" && \
  grep -E "131072|rror" "$OUT/${T}_128k_8b.log" | cut -c1-240
