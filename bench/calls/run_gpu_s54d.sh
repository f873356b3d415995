#!/bin/bash
# Fifty-fourth session, fourth call (H100; carry [".whl", ".kcache"]: the libraries of this tree's kernel and of the
# previous one, .kcache/prev_s54.cu, both built on the CPU machine):
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
