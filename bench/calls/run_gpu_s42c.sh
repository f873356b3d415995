#!/bin/bash
# Forty-second session, after s42 / s42b (which ran on an H100). Any card, one GPU, < 10 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s42c.sh
# On an H200: run_gpu_s42.sh (the filled slots there, then issue 7's whole table on that card). On an H100: the 32K
# batch-1 head_dim 128 question of the fortieth / forty-first sessions on a third host: the plan's 2 + 31 against
# 2 + 14 as ours_alt, three rounds with every peer, and 40K between (2 + 14 there: 180 INT2 tiles per CTA).
set -u
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if echo "$CARD" | grep -q H200; then exec bash bench/calls/run_gpu_s42.sh; fi
T="$(date +%Y-%m-%d)_s42c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for i in 1 2 3; do
  [ $(left) -ge 160 ] || break
  issue7_rows 32768 1 32k_$i "--alt-splits 32768x1=2+14"
done
[ $(left) -ge 160 ] && issue7_rows 40960 1 40k "--alt-splits 40960x1=2+14"
