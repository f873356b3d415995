#!/bin/bash
# For the next session (one GPU, < 10 min, carry [".whl", ".kcache"]; .kcache: the library of this tree):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s50.sh
# log8 records at batch 1 on variant 14 (paired tiles, 8-deep ring): s49f timed it 1.4 us faster than the plan's 7 at
# 128K b1 (32.9 vs 34.3 us, one round). Before the plan takes it for log8 pools:
# 1. the log8 GPU tests, variant 14 among them for the first time;
# 2. log8 variants 4 / 7 / 11 / 14 at batch 1 from 32K to 128K and at 2 / 4 pairs, two rounds;
# 3. issue 7's headline rows with every peer, fp16 and log8 records, once.
set -u
T="$(date +%Y-%m-%d)_s50"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
log8_tests 200
for r in 1 2; do
  [ $(left) -gt 200 ] || break
  variant_sweep 131072x1,98304x1,65536x1,49152x1,32768x1,131072x2,131072x4 4,7,11,14 var_log8_$r 150 "--scale-dtype log8"
done
[ $(left) -gt 160 ] && issue7_rows 131072,32768 32,1 key --also-log8
t done
