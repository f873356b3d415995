#!/bin/bash
# Fifty-first session, the last device minutes, an H100 (carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s51g.sh
# Why log8 records are ~6% slower than fp16 at 128K batch 1 in timed back-to-back calls (32.0 vs 33.8-34.2 us) when
# one isolated call under Nsight is not slower (46.4 vs 47.8 us, s51c): the same variants (fp16 7 / 4, log8 14 / 4) at
# 128K and 32K batch 1 with PDL on and early reads on (as every row), PDL off, and early reads off, two rounds.
set -u
T="$(date +%Y-%m-%d)_s51g"
source bench/gpu_env.sh
start_call
for r in 1 2; do
  for cfg in "pdl1_early1:" "pdl0_early1:--pdl 0" "pdl1_early0:--early-reads 0"; do
    tag=${cfg%%:*}; extra=${cfg#*:}
    [ $(left) -gt 40 ] || break 2
    variant_sweep 131072x1,32768x1 4,7 fp16_${tag}_$r 30 "$extra"
    variant_sweep 131072x1,32768x1 4,14 log8_${tag}_$r 30 "--scale-dtype log8 $extra"
  done
done
t done
pack_out
