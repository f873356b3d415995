#!/bin/bash
# Ran in the thirty-fifth session as `BUDGET=240 OSCARKV_COMMIT=04fbece bash bench/calls/run_gpu_s35d.sh` on the same
# H200 as run_gpu_s35c.sh (BENCHMARKS.md, thirty-fifth session).
# Thirty-fifth session, fourth call. Any card, one GPU, carry [".whl", ".kcache", ".alt/int2_paged_main_6427847.cu",
# ".alt/main_cuda_ops.py", ".alt/main_bench_decode.py"]:
#   BUDGET=250 OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s35d.sh
# run_gpu_s35c.sh's main rows failed (main's kernel through OSCARKV_KERNEL_SRC with this tree's cuda_ops.py: the
# DecodeParams structs differ by the poll-merge field); its "off" rows (this tree, poll merge off) were faster than
# the same session's earlier H200 figures of main (128K b32 688.5 vs 748.2 us), another machine or the code? Here
# main runs as main: its .cu, cuda_ops.py and bench_decode.py swapped in (prebuilt e231078c...), then restored;
# main / tree alternating, two rounds, 128K / 32K batch 1 (variant 4) and 128K batch 32 (variant 11).
set -u
T="$(date +%Y-%m-%d)_s35d"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
CU=src/oscarkv/kernels/cuda/int2_paged.cu; PY=src/oscarkv/kernels/cuda_ops.py; BD=bench/bench_decode.py
mkdir -p /tmp/keep && cp $CU $PY $BD /tmp/keep/
for r in 1 2; do
  for k in main tree; do
    [ $(left) -lt 40 ] && break
    if [ $k = main ]; then cp .alt/int2_paged_main_6427847.cu $CU; cp .alt/main_cuda_ops.py $PY; cp .alt/main_bench_decode.py $BD; fi
    timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
      --sweep --sweep-variants 4 --sweep-scales 1.0 --sweep-points 131072x1,32768x1 2>&1 | grep -E "^sweep|rror" \
      | sed "s/^/$k round $r: /" | cut -c1-110
    [ $(left) -gt 40 ] && timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
      --no-triton --no-append --sweep --sweep-variants 11 --sweep-scales 1.0 --sweep-points 131072x32 2>&1 \
      | grep -E "^sweep|rror" | sed "s/^/$k round $r: /" | cut -c1-110
    cp /tmp/keep/int2_paged.cu $CU; cp /tmp/keep/cuda_ops.py $PY; cp /tmp/keep/bench_decode.py $BD
  done
done | tee "$OUT/${T}_ab.txt"
t "A/B done"
