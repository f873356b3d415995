#!/bin/bash
# Fortieth session, fifth call, on branch s40-fill (the plan's filled slots: batch 1 at 32K-80K on 2 + 31 splits).
# Any card, one GPU, < 5 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s40e.sh
# Issue 7's 32K and 64K batch-1 rows under the new plan with every peer, the old plan's 2 + 14 as ours_alt; 32K at
# head_dim 64 as well.
set -u
T="$(date +%Y-%m-%d)_s40e"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
issue7_rows 32768 1 32k "--alt-splits 32768x1=2+14"
issue7_rows 65536 1 64k "--alt-splits 65536x1=2+14"
[ $(left) -ge 40 ] && issue7_rows 32768 1 32k_d64 "--head-dim 64 --alt-splits 32768x1=2+14"
