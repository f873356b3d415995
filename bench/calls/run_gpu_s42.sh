#!/bin/bash
# Prepared in the forty-first session (run in the forty-second, on an H100: part 2 only). Any card, one GPU, < 10 min,
# carry [".whl", ".kcache"] (the tree's library prebuilt into .kcache on the CPU machine: docs/KERNELS.md, "Build"):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> [TAG=s43] bash bench/calls/run_gpu_s42.sh
# (TAG: the results' file tag, default s42; a later session's rerun names its own, e.g. TAG=s43 for the H200 try.)
# 1. On an H200 only (it has run neither the ring at phase 0 nor the filled slots; README's H200 columns are the
#    thirty-fifth session's): the filled slots at 32K / 48K / 64K batch 1, every peer in the same run; the plan on an
#    H200 keeps the split model's 2 + 14 (cuda_ops.FILL_TILES: the fill is on by default on the H100 only), 2 + 31 runs
#    as ours_alt (and at head_dim 64). If 2 + 31 wins there, add the H200 to FILL_TILES (per head_dim since 5a1c273).
# 2. Issue 7's whole table on the card at hand (the last is the thirtieth session's, H100, before the phase-0 ring,
#    variant 7, merge slices and the filled slots): 4K-128K x batch 1 / 8 / 32 / 128 at head_dim 128, our kernel
#    against cuDNN SDPA, flash SDPA, FlashInfer BF16 and FP8-KV, the run's copy bandwidth, the append (plain and with
#    R_K) at batch 1 / 256; then head_dim 64 at 32K / 128K x batch 1 / 32.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s42}"
source bench/gpu_env.sh
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
if echo "$CARD" | grep -q H200; then
  issue7_rows 32768 1 32k "--alt-splits 32768x1=2+31"
  issue7_rows 65536 1 64k "--alt-splits 65536x1=2+31"
  issue7_rows 49152 1 48k "--alt-splits 49152x1=2+31"
  issue7_rows 32768 1 32k_d64 "--head-dim 64 --alt-splits 32768x1=2+31"
fi
timeout $(( $(left) - 100 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --append-batches 1,256 \
  --append-rotation fused --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|accuracy|Error|append cuda" "$OUT/${T}_table.log" | cut -c1-330
[ $(left) -gt 60 ] && timeout $(( $(left) - 5 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton \
  --no-append --head-dim 64 --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_table_d64.json" \
  > "$OUT/${T}_table_d64.log" 2>&1; t "head_dim 64 rc=$?"; grep -E "^L=|copy bandwidth" "$OUT/${T}_table_d64.log" | cut -c1-330
