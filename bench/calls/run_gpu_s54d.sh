#!/bin/bash
# Written in the fifty-fourth session and not run (its device time ran out): for the next session. First apply the
# change and build both libraries on the CPU machine:
#   cp src/oscarkv/kernels/cuda/int2_paged.cu .kcache/prev_s54.cu
#   git apply bench/results/2026-12-07_s54d_prep_q_div.patch
#   OSCARKV_KERNEL_CACHE=$PWD/.kcache python -c "from oscarkv.kernels import cuda_ops; cuda_ops.build()"
#   OSCARKV_KERNEL_SRC=$PWD/.kcache/prev_s54.cu OSCARKV_KERNEL_CACHE=$PWD/.kcache python -c "from oscarkv.kernels import cuda_ops; cuda_ops.build()"
# then (H100; carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s54d.sh
# prep_q without the IEEE division's slow path on the padding heads' lanes (s54c's Nsight profile: every INT2 warp
# called it, 127 / 0, with instruction-fetch stalls, right after the PDL wait): A = the previous kernel, B = this
# tree's, alternating at 32K and 128K batch 1 (the plan's variants 4 and 7); then the GPU kernel tests on B.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s54d}"
source bench/gpu_env.sh
start_call
src_ab 32768x1,131072x1 4,7 div 40 "$PWD/.kcache/prev_s54.cu" tree 2
[ $(left) -gt 40 ] && kernel_tests $(( $(left) - 10 ))
t done
pack_out
