#!/bin/bash
# Written in the fifty-fourth session, not run there (device time ran out) nor in the fifty-fifth (its device time
# was spent: 157 s left at its start). The fifty-fifth session prebuilt both libraries into .kcache on the CPU
# machine (git-ignored; rebuild them the same way if .kcache is gone):
#   .kcache/s54d_tree.cu = a8456fc's kernel (A), .kcache/s54d_fix.cu = it with the patch applied (B = the tree below)
#   for f in s54d_tree s54d_fix; do OSCARKV_KERNEL_SRC=$PWD/.kcache/$f.cu OSCARKV_KERNEL_CACHE=$PWD/.kcache \
#     python -c "from oscarkv.kernels import cuda_ops; cuda_ops.build()"; done
# Before the call apply the change to the tree (the library cache is keyed by the source's text, so the tree's
# library is s54d_fix's): git apply bench/results/2026-12-07_s54d_prep_q_div.patch
# Then (H100; the carry limit is 64 MiB with the tree, so only these libraries (11 MB each) and A's source:
#   carry [".whl", ".kcache/9f6dfce5ca7e34b8", ".kcache/41f21771678a3739", ".kcache/s54d_tree.cu"]):
#   BUDGET=560 OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s54d.sh
# prep_q without the IEEE division's slow path on the padding heads' lanes (s54c's Nsight profile: every INT2 warp
# called it, 127 / 0, right after the PDL wait; 4.4% of the 32K batch-1 call's stall samples): A = the previous
# kernel, B = the patched tree, alternating at 32K and 128K batch 1 (the plan's variants 4 and 7), two rounds; then,
# on B, the GPU kernel tests, issue 7's rows with every peer (fp16 and log8 records, the bare read), the paged-cache
# and vLLM-shaped GPU tests and the log8 tests. Keep the change if B is faster and every test passes.
# (The fifty-sixth session gave the merges' LSE address one home on main, `lse_of`: the whole library's SASS is that of
# a8456fc, all 240 functions instruction for instruction, so A = .kcache/s54d_tree.cu (a8456fc's text) is still the
# tree's kernel; the patch was rebased onto it and B's library rebuilt: 41f21771678a3739.)
set -u
T="$(date +%Y-%m-%d)_${TAG:-s54d}"
source bench/gpu_env.sh
start_call
src_ab 32768x1,131072x1 4,7 div 330 "$PWD/.kcache/s54d_tree.cu" tree 2
[ $(left) -gt 180 ] && kernel_tests 150
[ $(left) -gt 150 ] && issue7_rows 131072,32768 32,1 key "--also-log8 --read-floor 131072x1,32768x1"
[ $(left) -gt 80 ] && paged_tests $(( $(left) - 50 ))
[ $(left) -gt 45 ] && log8_tests $(( $(left) - 15 ))
t done
pack_out
