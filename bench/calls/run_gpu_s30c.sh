#!/bin/bash
# Twenty-ninth session, for a later device call (main, or rot-lean merged). One GPU, < 10 min, carry [".whl", ".kcache"].
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s30c.sh
# Issue 7's whole table on the card at hand with today's kernel (the last full table is the twelfth session's, H200;
# the H100 has 32K / 128K x batch 1 / 32 only, twenty-sixth session): contexts 4K-128K x batch 1 / 8 / 32 / 128 at
# head_dim 128, our kernel against cuDNN SDPA, flash SDPA, FlashInfer BF16 and FP8-KV, copy bandwidth of the same
# run, the append (plain and with R_K) at batch 1 / 256; then head_dim 64 at 32K / 128K x batch 1 / 32.
set -u
T="$(date +%Y-%m-%d)_s30c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 400 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --append-batches 1,256 \
  --append-rotation fused --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|accuracy|Error|append cuda" "$OUT/${T}_table.log" | cut -c1-330
[ $(left) -gt 90 ] && timeout $(( $(left) - 5 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton \
  --no-append --head-dim 64 --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_table_d64.json" \
  > "$OUT/${T}_table_d64.log" 2>&1 && t "head_dim 64 rc=$?" && grep -E "^L=|copy bandwidth" "$OUT/${T}_table_d64.log" | cut -c1-330
