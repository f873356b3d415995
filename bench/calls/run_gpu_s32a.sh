#!/bin/bash
# For the thirty-second session (main after the thirty-first). One GPU, < 3 min, carry [".whl", ".kcache"].
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s32a.sh
# Thirty-first session, calls f and g (H100): next to the o_proj GEMV the batch-1 decode costs 1.4-2.2 us more than
# beside a kernel that does nothing, and the GEMV costs the same either way. decode_chain.py now also times the
# decode-then-GEMV pairs with the decode's PDL off: if the extra goes, it comes from the two kernels overlapping
# (the GEMV scheduled early on the decode's trigger); if not, from the GEMV's traffic before the decode.
set -u
T="$(date +%Y-%m-%d)_s32a"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout $(( $(left) - 5 )) python3 bench/decode_chain.py --points 131072x1,32768x1 --out "$OUT/${T}_chain.json" \
  > "$OUT/${T}_chain.log" 2>&1
t "decode chain rc=$?"; grep -E "^chain|rror" "$OUT/${T}_chain.log" | cut -c1-300
