#!/bin/bash
# Prepared in the thirty-fifth session for the next one. Any card (both, if the session gets both), one GPU,
# < 5 min, carry [".whl", ".kcache", ".alt/int2_paged_main_6427847.cu", ".alt/int2_paged_main_pad80.cu",
# ".alt/main_cuda_ops.py", ".alt/main_bench_decode.py"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s36.sh
# Why: on one H200 the tree with the poll merge's code (off) ran 4-9% faster than main 6427847 (s35c / s35d), and
# nothing in its logic explains it. Two suspects: the decode kernel's static shared memory (528 -> 608 bytes, which
# moves the dynamic ring's base) and ptxas's schedule of the tile loop. Three kernels, alternating, two rounds:
#   main  = 6427847's .cu, cuda_ops.py and bench_decode.py swapped in (prebuilt e231078c...);
#   pad   = the same with an 80-byte static shared array (.alt/int2_paged_main_pad80.cu: ptxas 608 bytes smem, main's
#           spills), still main's Python;
#   tree  = this tree (poll merge off).
# pad ~ tree: the shared-memory layout is the cause (then make it deliberate: align / place the ring on purpose);
# pad ~ main: the schedule (then look for what the loop gained). .alt files: `git show 6427847:<path>` for main's
# three; prebuilt in .kcache: main e231078c..., pad f00a0f40..., tree 43e65b49... (its trace aeffb597..., main's
# 0d15cc38...). The pad .cu is main's with `__shared__ unsigned char sm_pad[80];` and a volatile store to it under
# `p.probe == 99` after `__shared__ int sm_last;`.
set -u
T="$(date +%Y-%m-%d)_s36"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
CU=src/oscarkv/kernels/cuda/int2_paged.cu; PY=src/oscarkv/kernels/cuda_ops.py; BD=bench/bench_decode.py
mkdir -p /tmp/keep && cp $CU $PY $BD /tmp/keep/
for r in 1 2; do
  for k in main pad tree; do
    [ $(left) -lt 40 ] && break
    if [ $k != tree ]; then cp .alt/main_cuda_ops.py $PY; cp .alt/main_bench_decode.py $BD; fi
    [ $k = main ] && cp .alt/int2_paged_main_6427847.cu $CU
    [ $k = pad ] && cp .alt/int2_paged_main_pad80.cu $CU
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
