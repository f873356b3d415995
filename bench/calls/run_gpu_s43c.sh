#!/bin/bash
# Forty-third session. Any card, one GPU, < 10 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s43c.sh
# Is FlashInfer's paged decode faster in another configuration than the one every table has used (tensor-core decode,
# use_tensor_cores=True, on pages of 16 tokens)? bench_decode.py --flashinfer-configs times its tensor-core and
# CUDA-core decode on pages of 16 and 64 tokens, BF16 and FP8 KV, beside our kernel and cuDNN / flash SDPA, and takes
# the fastest of each dtype as the peer: 16K-128K x batch 1 / 8 / 32 at head_dim 128, then head_dim 64 at 32K / 128K
# x batch 1 / 32 with what the call has left (FI_CONTEXTS / FI_BATCHES: other head_dim 128 points).
set -u
T="$(date +%Y-%m-%d)_s43c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
FI="--flashinfer-configs tc16,cc16,tc64,cc64"
timeout $(( $(left) - 120 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append $FI \
  --contexts ${FI_CONTEXTS:-16384,32768,65536,131072} --batches ${FI_BATCHES:-1,8,32} --out "$OUT/${T}_fi.json" > "$OUT/${T}_fi.log" 2>&1
t "head_dim 128 rc=$?"; grep -E "^L=|copy bandwidth|rror|fi_" "$OUT/${T}_fi.log" | cut -c1-330
[ $(left) -gt 60 ] && timeout $(( $(left) - 5 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton \
  --no-append $FI --head-dim 64 --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_fi_d64.json" \
  > "$OUT/${T}_fi_d64.log" 2>&1; t "head_dim 64 rc=$?"; grep -E "^L=|copy bandwidth|rror|fi_" "$OUT/${T}_fi_d64.log" | cut -c1-330
