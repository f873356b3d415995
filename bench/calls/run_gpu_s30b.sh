#!/bin/bash
# Twenty-ninth session, for the next device call, with branch rot-lean checked out. One GPU, < 10 min, carry
# [".whl", ".kcache", "bench/alt_int2_paged_main.cu"]: bench/alt_int2_paged_main.cu is main's kernel (`git show
# main:src/oscarkv/kernels/cuda/int2_paged.cu > bench/alt_int2_paged_main.cu`; git-ignored); .kcache holds both
# libraries (main 7e1e6eedc0fb396a and the branch's, built on the CPU machine with cuda_ops.build()). Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s30b.sh
# Why: with R_K fused the append at batch 59 takes 9.63 us per step against 3.38 without (H100, run_gpu_s29b), and
# 4.01 against 1.41 at batch 1. The SASS of main's rotation CTAs: ~1100 instructions per thread after the PDL
# wait (integer divisions by the GQA group for every staged word and every store, a 16-deep MMA chain per m-tile,
# two m-tiles one after the other) and 78 conversions per thread (46 F2F + 32 F2FP; the conversion unit does 16
# per clock per SM). The branch: row pointers in shared memory built by 32 threads before the PDL wait (with R's
# loads), hi / lo from one paired conversion each (32 F2FP, no F2F), both m-tiles' MMA chains side by side:
# ~480 static instructions, no loop (SASS; 64 registers, no spill). Results bit-identical (same rounding, same
# MMA order per m-tile).
# 1. the kernel GPU tests (append and rotation) and the paged-cache GPU tests with the branch's kernel;
# 2. the append microbenchmark, main's kernel vs the branch's, batch 1 / 59 / 256, R_K fused, twice alternating;
# 3. Nsight Compute of one append at batch 59 with R_K, branch and main;
# 4. equal KV memory, Qwen3-4B then Qwen3-8B, branch vs main kernel (same Python), same card.
set -u
T="$(date +%Y-%m-%d)_s30b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s30
MAINSRC=$PWD/bench/alt_int2_paged_main.cu
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py \
  -k "append or rotat or graph or paged" > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; tail -1 "$OUT/${T}_tests.log" | cut -c1-300; grep -E "^FAILED|Error" "$OUT/${T}_tests.log" | head -5 | cut -c1-200
for r in 1 2; do
  for which in branch main; do
    src=""; [ $which = main ] && src=$MAINSRC
    OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --contexts "" --no-flashinfer --no-triton \
      --append-batches 1,59,256 --append-rotation fused --out "$OUT/${T}_append_${which}_$r.json" > "$OUT/${T}_append_${which}_$r.log" 2>&1
    t "append $which round $r rc=$?"; grep -E "append cuda.*(fused|pdl=1 rotation=None)|rror" "$OUT/${T}_append_${which}_$r.log" | cut -c1-110
  done
done
for which in branch main; do
  src=""; [ $which = main ] && src=$MAINSRC
  OSCARKV_KERNEL_SRC=$src timeout 90 ncu --clock-control none -k regex:append_kernel --launch-skip 4 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    python3 bench/ncu_append.py 59 fused > "$OUT/${T}_ncu_append_$which.txt" 2>&1
  t "ncu append fused $which rc=$?"
  grep -E "Duration|Warp Cycles Per Issued|Executed Ipc|Achieved Occupancy" "$OUT/${T}_ncu_append_$which.txt" | head -6 | cut -c1-120
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
