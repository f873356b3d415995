#!/bin/bash
# Fifty-fourth session, third call (H100; carry [".whl", ".kcache"], this tree's library built on the CPU machine):
#   BUDGET=<s> OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s54c.sh
# Where the lean end of the call stalls: Nsight's per-instruction stall samples at 32K batch 1 (variant 4) and 128K
# batch 1 (variant 7), the fifty-third session's kernel; bench/ncu_stalls.py's last lines split the end's samples by
# reason (instruction fetch against barrier waits and dependencies), as the s53a profile of the longer end did.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s54c}"
source bench/gpu_env.sh
start_call
for pt in "32768 1 4" "131072 1 7"; do
  [ $(left) -gt 100 ] || break
  ncu_source "$pt"
  tail -2 "$OUT/${T}_stalls_$(echo $pt | tr ' ' '_').txt" | cut -c1-300
done
t done
pack_out
