#!/bin/bash
# Thirty-seventh session, second call. Any card, one GPU, < 10 min, carry [".whl", ".kcache"] (.kcache as in
# run_gpu_s37.sh: 08397414c61c8ff5; this call changes only the plan's Python rule):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s37b.sh
# Call s37's sweep (H100) found variant 7 (8 warps, 8-deep ring) fastest at 128K batch 1 (31.6 us against 33.6 for
# the plan's 4), and the plan's paired 11 well behind 0 / 4 at 16K b8, 64K b8 and 32K b32. The plan now runs 7 below
# 64 pairs from 4096 INT2 tiles on the H100 (DEEP_RING_FROM_TILES). In one call:
# 1. issue 7's 128K rows with every peer (the plan now on variant 7 at batch 1);
# 2. step_ablate of Qwen3-8B at 128K batch 1 (its step's plan: variant 7 on the H100);
# 3. a denser variant sweep, two rounds, for the plan's rule at every batch: variants 0 / 4 / 7 / 10 / 11;
# 4. step_ablate of Qwen3-4B if time is left.
set -u
T="$(date +%Y-%m-%d)_s37b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s37
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
issue7_rows 131072 1,32 128k
ablate_128k qwen3-8b
P=16384x1,32768x1,65536x1,98304x1,131072x1,131072x2,131072x4,32768x8,65536x8,131072x8,16384x32,65536x32,32768x59,32768x128
timeout $(( $(left) - 100 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton \
  --no-append --sweep --sweep-variants 0,4,7,10,11 --sweep-scales 1.0 --sweep-points "$P,$P" > "$OUT/${T}_variants.log" 2>&1
t "variant sweep rc=$?"; grep -cE "^sweep" "$OUT/${T}_variants.log"
[ $(left) -ge 95 ] && ablate_128k qwen3-4b
