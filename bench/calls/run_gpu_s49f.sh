#!/bin/bash
# Forty-ninth session, sixth call (one GPU, < 4 min, carry [".whl", ".kcache"]; .kcache: main's library):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s49f.sh
# Variant 14 (variant 7's 8 warps and 8-deep ring with paired tiles) at batch 1, never timed there: its tile loop is
# 124 SASS instructions per tile against variant 7's 163 (bench/sass_count.py --only 128,14; log8 records 141 vs
# 198), and batch 1 is partly issue-bound (s49c). Sweeps at the plan's split counts, fp16 then log8 records.
set -u
T="$(date +%Y-%m-%d)_s49f"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
variant_sweep 131072x1,32768x1 7,14,4 var_fp16 25
variant_sweep 131072x1,32768x1,131072x32 7,14,11 var_log8 5 "--scale-dtype log8"
t done
