#!/bin/bash
# Fortieth session, second call. Any card, one GPU, < 10 min, carry [".whl", ".kcache"] (the tree's library prebuilt):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s40b.sh
# 1. the kernel GPU tests (the .cu's review rename NSL / sm_slice of c415a8c has not run on a GPU);
# 2. issue 8's question before building a prefetch: would the decode cost less in the layer (append -> decode ->
#    o_proj GEMV) if its first pages were L2-hot? decode_chain.py --warm-tiles: a gather of the first 8 tiles of each
#    INT2 split and the whole BF16 tier just before the append, against the same chain without it; and would the
#    o_proj GEMV after it cost less if a second stream read 16 MB of its weights into L2 beside the decode (its start
#    and end leave HBM idle; --prefetch-mb: append -> (decode | read) -> GEMV against the same fork with no read)?
set -u
T="$(date +%Y-%m-%d)_s40b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s40b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
kernel_tests 200
timeout $(( $(left) - 10 )) python3 bench/decode_chain.py --points 131072x1,32768x1 --warm-tiles 8 --prefetch-mb 16 \
  --out "$OUT/${T}_chain.json" > "$OUT/${T}_chain.log" 2>&1
t "chain rc=$?"; grep -E "chain|rror" "$OUT/${T}_chain.log" | cut -c1-700
