#!/bin/bash
# Thirty-first session, last call (main after e0dbe27). One GPU, < 2 min, carry [".whl", ".kcache"].
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> BUDGET=100 bash bench/calls/run_gpu_s31g.sh
# Call f: right after the append the 128K batch-1 decode hides only 1.2 of the 3.7 us its start costs. Its plan's grid
# (2 + 31 splits x 8 KV heads = 264 CTAs) is exactly two CTAs on each of the 132 SMs at the kernel's 128 registers x 256
# threads, so an SM that still holds an append CTA can start only one decode CTA: does a grid with room (2 + 29, 1 +
# 31, 2 + 27) do better in the layer's chain?
set -u
T="$(date +%Y-%m-%d)_s31g"
source bench/gpu_env.sh
timeout $(( $(left) - 5 )) python3 bench/decode_chain.py --points 131072x1 \
  --alt-splits 131072x1=2+29,131072x1=1+31,131072x1=2+27 --out "$OUT/${T}_chain.json" > "$OUT/${T}_chain.log" 2>&1
t "decode chain rc=$?"; grep -E "^chain|rror" "$OUT/${T}_chain.log" | cut -c1-260
