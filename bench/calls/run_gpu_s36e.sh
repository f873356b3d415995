#!/bin/bash
# Thirty-sixth session. Any card, one GPU, < 10 min, carry [".whl", ".kcache", ".alt/ph"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s36e.sh
# 1. kernel GPU tests with this tree (the poll merge writes its output through the last-CTA merge's store lambda);
# 2. this tree against 5e424f7 (.alt/ph/int2_paged_5e424f7.cu: before that mend), alternating, two rounds (the
#    second only with time left), and the plan's split counts x0.75 / 1.5 at batch 1 (the loop is faster now);
# 3. on an H200: issue 7's rows with every peer (128K batch 1 / 32, 32K batch 1 / 32 / 128), then step_ablate
#    of Qwen3-8B at 128K; on an H100 (whose rows and ablations call s36b measured): issue 8's equal-memory
#    throughput, Qwen3-8B then Qwen3-4B.
# (After it ran, its rows / step_ablate commands moved into bench/gpu_env.sh's issue7_rows / ablate_128k: the same
# commands and files.)
set -u
T="$(date +%Y-%m-%d)_s36e"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s36
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log"
for r in 1 2; do
  [ $r = 2 ] && [ $(left) -lt 330 ] && break
  for k in tree 5e424f7; do
    src=""; [ $k != tree ] && src=$PWD/.alt/ph/int2_paged_$k.cu
    OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
      --no-triton --no-append --sweep --sweep-variants 4 --sweep-scales 1.0 --sweep-points 131072x1,32768x1 2>&1 \
      | grep -E "^sweep|rror" | sed "s/^/$k round $r: /" | cut -c1-110
    OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
      --no-triton --no-append --sweep --sweep-variants 11 --sweep-scales 1.0 --sweep-points 131072x32 2>&1 \
      | grep -E "^sweep|rror" | sed "s/^/$k round $r: /" | cut -c1-110
  done
done | tee "$OUT/${T}_ab.txt"
t "A/B done"
timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
  --sweep --sweep-variants 4 --sweep-scales 0.75,1.0,1.5 --sweep-points 131072x1,32768x1 2>&1 | grep -E "^sweep|rror" \
  | cut -c1-110 | tee "$OUT/${T}_splits.txt"
t "split sweep done"
if echo "$CARD" | grep -q H200; then
  issue7_rows 131072 1,32 128k
  issue7_rows 32768 1,32,128 32k
  [ $(left) -gt 150 ] && ablate_128k qwen3-8b
else
  for m in qwen3-8b qwen3-4b; do
    [ $(left) -lt 130 ] && break
    eq_memory $m
  done
fi
