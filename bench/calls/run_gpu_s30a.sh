#!/bin/bash
# Twenty-ninth session, for the next device call (main 3e2a952 or later). One GPU, < 10 min, carry [".whl", ".kcache"]
# (.kcache: this tree's kernel library, cuda_ops.build()). Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s30a.sh
# 1. GPU tests: the paged path (incl. the new centered + absorbed test: mu_V in o_proj's bias, compiled and not) and
#    the compiled step;
# 2. where the append's R_K rotation still spends its time: at batch 59 the append with R_K fused takes 9.63 us per
#    step against 3.38 without (H100, run_gpu_s29b), although a rotation CTA's work (32 rows x 128 x 128 MMAs, R from
#    L2) is ~1 us of issue: Nsight Compute on one append launch with and without the rotation (PDL off);
# 2b. the batch-1 INT2 split count on this card (32K / 128K, variants 4 / 11);
# 3. which kernels OSCAR's compiled step runs that BF16's does not (profile_step + kernel_diff, Qwen3-4B 8K batch 1:
#    the 8B's step without KV work is 0.2 ms above BF16's without attention at batch 59, 7 us per layer at batch 1);
# 4. equal memory, both models, and the 8B 128K batch-1 ablation (on an H200 these are the first numbers with the
#    staged rotation; on an H100 more samples of the 4B's 6.00x).
set -u
T="$(date +%Y-%m-%d)_s30a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s30
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; tail -1 "$OUT/${T}_tests.log" | cut -c1-200; grep -E "^FAILED|^ERROR" "$OUT/${T}_tests.log" | head -5 | cut -c1-200
# batch-1 split counts on this card (the plan's rule was fitted on the H200; issue 7's 4x at 32K batch 1 needs 13.8 us on
# an H100, 15.4 today): variants 4 / 11 x INT2 split scales, two rounds
for r in 1 2; do
  timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
    --sweep --sweep-variants 4,11 --sweep-scales 0.5,0.75,1.0,1.5,2.0 --sweep-points 32768x1,131072x1 \
    --out "$OUT/${T}_sweep_b1_$r.json" > "$OUT/${T}_sweep_b1_$r.log" 2>&1
  t "batch-1 sweep $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_sweep_b1_$r.log" | cut -c1-100
  # 128K batch 32: the H100 misses 4x FlashInfer FP8 by 1% with the plan's variant 10 (925.6 us; variant 4 915.7 in
  # the twenty-sixth session's sweep, one sample)
  timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
    --sweep --sweep-variants 4,0,10,11 --sweep-scales 1.0 --sweep-points 131072x32 \
    --out "$OUT/${T}_sweep_b32_$r.json" > "$OUT/${T}_sweep_b32_$r.log" 2>&1
  t "128K batch-32 sweep $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_sweep_b32_$r.log" | cut -c1-100
done
for rot in fused none; do
  timeout 90 ncu --clock-control none -k regex:append_kernel --launch-skip 4 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    python3 bench/ncu_append.py 59 $rot > "$OUT/${T}_ncu_append_$rot.txt" 2>&1
  t "ncu append rotation=$rot rc=$?"
  grep -E "Duration|Registers Per|Achieved Occupancy|Grid Size|Stall|Warp Cycles Per Issued|Issued Warp" \
    "$OUT/${T}_ncu_append_$rot.txt" | head -16 | cut -c1-150
done
timeout 150 python3 bench/profile_step.py --model qwen3-4b --context 8192 --modes compiled --fuse-projections \
  --out "$OUT/${T}_profile_4b.json" > "$OUT/${T}_profile_4b.log" 2>&1
t "profile 4B 8K rc=$?"; grep -E "kernels/step|replay" "$OUT/${T}_profile_4b.log" | cut -c1-200
python3 bench/kernel_diff.py "$OUT/${T}_profile_4b.json" | cut -c1-160 | head -40
EQ=(--contexts "" --modes compiled --tput-context 32768 --fuse-projections --steps 32 --compiled-bf16-backends CUDNN_ATTENTION)
for m in qwen3-4b qwen3-8b; do
  [ $(left) -lt 90 ] && break
  timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models $m "${EQ[@]}" \
    --out "$OUT/${T}_eq_$m.json" > "$OUT/${T}_eq_$m.log" 2>&1
  t "equal memory $m rc=$?"; grep -E "equal|Error|error" "$OUT/${T}_eq_$m.log" | cut -c1-240
done
[ $(left) -gt 150 ] && timeout $(( $(left) - 5 )) python3 bench/step_ablate.py --model qwen3-8b --context 131072 \
  --bf16-backends CUDNN_ATTENTION --out "$OUT/${T}_ablate_8b.json" > "$OUT/${T}_ablate_8b.log" 2>&1 && \
  t "ablate 8B 128K rc=$?" && tail -12 "$OUT/${T}_ablate_8b.log" | cut -c1-200
