#!/bin/bash
# Prepared in the thirty-seventh session; ran in the thirty-eighth (H100 branch; BENCHMARKS.md). Any card, one GPU,
# < 10 min, carry [".whl", ".kcache"] (the library of the tree with variants 12-14 is prebuilt in .kcache as
# dc51239354b056e9; any .cu change needs a rebuild first: docs/KERNELS.md, "Build"):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s38.sh
# 1. the kernel GPU tests (new: variants 12 / 13 = 7 with 12- / 10-deep rings, 14 = 7 paired; head_dim 128;
#    and the plan's per-card VARIANT_RULES, written after the thirty-seventh session's last call);
# 2. the deeper rings where 7 won (128K b1; 472 / 1024 pairs) and paired 7 at 256+ pairs, two rounds;
# 3. on an H200 (no phase-0 figures yet): the H100's sweep of the thirty-seventh session (variants 0 / 4 / 7 / 10 /
#    11 at 14 points, two rounds) for its VARIANT_RULES row, then issue 7's 128K and 32K rows;
#    on an H100: issue 7's rows under the new table (128K b1 / b8 / b32, 32K b1 / b8 / b32 / b128), then equal
#    memory of Qwen3-8B (its batch 59 now on variant 7).
set -u
T="$(date +%Y-%m-%d)_s38"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s38
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
kernel_tests 170
variant_sweep 131072x1,98304x1,131072x1,98304x1 4,7,13,12 deep_b1
variant_sweep 32768x59,131072x32,32768x128,32768x59,131072x32,32768x128 7,11,12,14 deep_large
if echo "$CARD" | grep -q H200; then
  P=16384x1,32768x1,65536x1,98304x1,131072x1,131072x2,131072x4,32768x8,65536x8,131072x8,16384x32,65536x32,32768x59,32768x128
  variant_sweep "$P,$P" 0,4,7,10,11 rule 130
  issue7_rows 131072 1,32 128k
  [ $(left) -ge 40 ] && issue7_rows 32768 1 32k
else
  issue7_rows 131072 1,8,32 128k
  issue7_rows 32768 1,8,32,128 32k
  [ $(left) -ge 130 ] && eq_memory qwen3-8b
fi
