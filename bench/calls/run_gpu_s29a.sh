#!/bin/bash
# Twenty-eighth session, for the next device call (main with the per-bucket graphs, 37546c6 or later). One GPU,
# < 10 min, carry [".whl", ".kcache"] (.kcache 578425ff6d544de1: this tree's kernel library). Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s29a.sh
# Why: at equal memory (40 GiB, 32K, batch 59) the H100 gives Qwen3-8B 6.05x and Qwen3-4B 5.91x (6x needs its step
# 1.2% faster); on the H200 the kernel sweep (run_gpu_s28a.sh) timed DecodePlan's variant 10 at 375.0 us with 3 INT2
# splits per (sequence, KV head) (split scale 0.75) against 386.7 us with the planned 4, one sample.
# 1. is 3 splits faster at 32K batch 59 on this card, in three alternating rounds (and 128K batch 32, where the H100
#    misses 4x FlashInfer FP8 by 1%)? 2. the model step at equal memory with the INT2 split count x0.75 against the
#    default, Qwen3-4B then Qwen3-8B, alternating (bench_model --decode-int2-split-scale).
set -u
T="$(date +%Y-%m-%d)_s29a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s29
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for r in 1 2 3; do
  timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
    --sweep --sweep-variants 10 --sweep-scales 0.6,0.75,1.0 --sweep-points 32768x59,131072x32 \
    --out "$OUT/${T}_sweep$r.json" > "$OUT/${T}_sweep$r.log" 2>&1
  t "sweep $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_sweep$r.log" | cut -c1-100
done
EQ=(--contexts "" --modes compiled --tput-context 32768 --fuse-projections --steps 32 --compiled-bf16-backends CUDNN_ATTENTION)
for m in qwen3-4b qwen3-8b; do
  for sc in 1.0 0.75; do
    [ $(left) -lt 60 ] && break 2
    timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models $m "${EQ[@]}" --decode-int2-split-scale $sc \
      --out "$OUT/${T}_eq_${m}_x$sc.json" > "$OUT/${T}_eq_${m}_x$sc.log" 2>&1
    t "equal memory $m int2 splits x$sc rc=$?"; grep -E "equal|Error|error" "$OUT/${T}_eq_${m}_x$sc.log" | cut -c1-240
  done
done
