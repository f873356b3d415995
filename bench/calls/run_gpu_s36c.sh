#!/bin/bash
# Thirty-sixth session. Any card, one GPU, < 10 min, carry [".whl", ".kcache", ".alt/ph"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s36c.sh
# run_gpu_s36.sh (H100) found the 4-9% of the thirty-fifth session in the static shared memory's size alone
# (main + an 80-byte pad == the poll-merge tree): it sets the dynamic ring's shared-address phase mod 128
# (528 -> 16, 608 -> 96). This tree places the ring at a fixed phase (OSCAR_RING_PHASE, default 0). In one call:
# 1. the kernel GPU tests with this tree (the ring's base moved);
# 2. phases 0 (this tree) / 16 (main's) / 32 / 64 / 96 (the s35 tree's), alternating, two rounds, at 128K / 32K
#    batch 1 (variant 4) and 128K batch 32 (variant 11); .alt/ph/int2_paged_ph<N>.cu differ only in the #define;
# 3. issue 7's rows with every peer (run_gpu_s36b.sh's first part) if time is left.
set -u
T="$(date +%Y-%m-%d)_s36c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log"
for r in 1 2; do
  for ph in 0 16 32 64 96; do
    [ $(left) -lt 240 ] && break
    src=""; [ $ph != 0 ] && src=$PWD/.alt/ph/int2_paged_ph$ph.cu
    OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
      --no-triton --no-append --sweep --sweep-variants 4 --sweep-scales 1.0 --sweep-points 131072x1,32768x1 2>&1 \
      | grep -E "^sweep|rror" | sed "s/^/phase $ph round $r: /" | cut -c1-110
    OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
      --no-triton --no-append --sweep --sweep-variants 11 --sweep-scales 1.0 --sweep-points 131072x32 2>&1 \
      | grep -E "^sweep|rror" | sed "s/^/phase $ph round $r: /" | cut -c1-110
  done
done | tee "$OUT/${T}_ab.txt"
t "A/B done"
if [ $(left) -gt 200 ]; then
  timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 131072 \
    --batches 1,32 --out "$OUT/${T}_128k.json" > "$OUT/${T}_128k.log" 2>&1
  t "128K rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_128k.log" | cut -c1-330
fi
if [ $(left) -gt 100 ]; then
  timeout $(( $(left) - 5 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts 32768 \
    --batches 1,32,128 --out "$OUT/${T}_32k.json" > "$OUT/${T}_32k.log" 2>&1
  t "32K rc=$?"; grep -E "^L=|rror" "$OUT/${T}_32k.log" | cut -c1-330
fi
