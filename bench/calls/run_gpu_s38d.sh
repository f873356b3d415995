#!/bin/bash
# Thirty-eighth session, call d: the H200's first figures with the ring at shared-address phase 0 (thirty-sixth
# session). One GPU, < 10 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s38d.sh
# On an H200: issue 7's 128K (b1, b8, b32) and 32K b1 rows with every peer under the default (H200) variant rule, then
# one round of the thirty-seventh session's variant sweep (0 / 4 / 7 / 10 / 11 at 14 points) for its VARIANT_RULES row.
# On another card: nothing beyond the card's name (its figures are in s37 / s38 / s38b).
set -u
T="$(date +%Y-%m-%d)_s38d"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s38d
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
echo "$CARD" | grep -q H200 || exit 0
issue7_rows 131072 1,8,32 128k
issue7_rows 32768 1 32k
P=16384x1,32768x1,65536x1,98304x1,131072x1,131072x2,131072x4,32768x8,65536x8,131072x8,16384x32,65536x32,32768x59,32768x128
variant_sweep "$P" 0,4,7,10,11 rule 10
