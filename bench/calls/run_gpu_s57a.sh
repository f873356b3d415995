#!/bin/bash
# Fifty-seventh session, after run_gpu_s56a.sh rejected both patches (B = A, C slower): main's own kernel (the lse_of
# refactor of 9120553, SASS-identical to a8456fc's but not yet GPU-run) through every GPU suite, issue 7's rows on it,
# and a split sweep at batch 1 around the plan's counts (the lean end of the fifty-third session changed the end's
# cost per split; the counts were last swept before it). carry [".whl", ".kcache/45dc6da2faedfb22"] (main's library,
# built on the CPU machine):
#   BUDGET=540 OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s57a.sh
set -u
T="$(date +%Y-%m-%d)_${TAG:-s57a}"
source bench/gpu_env.sh
start_call
kernel_tests 200
variant_sweep 32768x1 4,7 splits 20 \
  "--sweep-splits 32768x1=2+14,32768x1=2+22,32768x1=2+31,32768x1=3+30,131072x1=2+31,131072x1=3+30,131072x1=2+30"
[ $(left) -gt 170 ] && issue7_rows 131072,32768 32,1 key "--also-log8 --read-floor 131072x1,32768x1"
[ $(left) -gt 90 ] && paged_tests $(( $(left) - 40 > 120 ? 120 : $(left) - 40 ))
[ $(left) -gt 45 ] && log8_tests $(( $(left) - 15 > 60 ? 60 : $(left) - 15 ))
t done
pack_out
