#!/bin/bash
# Thirty-first session, last call (main after 4393bc5). One GPU, < 4 min, carry [".whl", ".kcache"].
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> BUDGET=240 bash bench/calls/run_gpu_s31f.sh
# Call a: at batch 1 the decode costs ~2 us more in append -> decode -> o_proj GEMV than with PDL off. Whose is it?
# decode_chain.py now also times the decode after and before a kernel that does nothing (launched without PDL), right
# after the append, and the GEMV beside that kernel instead of back to back with itself.
set -u
T="$(date +%Y-%m-%d)_s31f"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout $(( $(left) - 5 )) python3 bench/decode_chain.py --points 131072x1,32768x1 --out "$OUT/${T}_chain.json" \
  > "$OUT/${T}_chain.log" 2>&1
t "decode chain rc=$?"; grep -E "^chain|rror" "$OUT/${T}_chain.log" | cut -c1-260
