#!/bin/bash
# Fortieth session, third call. Any card, one GPU, < 5 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s40c.sh
# Call s40 measured 64K batch 1 at 2+31 splits on variant 7 (merged by 8 slices) 21.0 us against the plan's 2+14 on
# variant 4 21.7 (three rounds). Before the plan moves: 48K / 64K / 80K batch 1, variants 4 and 7, 2+14 against 2+31
# (and 2+23 on 7), three alternating rounds, explicit split counts.
set -u
T="$(date +%Y-%m-%d)_s40c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
P=""
for L in 49152 65536 81920; do P="$P,${L}x1=2+14,${L}x1=2+31"; done
for r in 1 2 3; do
  variant_sweep "" 4 v4_r$r 20 "--sweep-splits ${P#,}"
  variant_sweep "" 7 v7_r$r 20 "--sweep-splits ${P#,},65536x1=2+23"
done
