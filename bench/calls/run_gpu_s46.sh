#!/bin/bash
# Forty-sixth session, for an H200 (any card runs it), one GPU, < 10 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s46.sh
# README's H200 columns are the thirty-fifth session's (before the ring's phase-0 alignment, variant 7 and the
# filled slots; FlashInfer on pages of 16 only). Most important first, as the call may be cut:
# 1. issue 7's three headline points (128K b1, 128K b32, 32K b1) and 32K b32 with every peer, FlashInfer tc16 + tc64
#    (bench_decode's default), 32K b1 also at 2 + 31 splits (the filled slots; the plan keeps 2 + 14 off the H100);
# 2. the variants at those points on this card (its VARIANT_RULES are the eighteenth session's: 4 below 64 pairs,
#    11 from 64, 10 from 256; the H100's rules since then pick 7 at 128K b1 and 11 at 128K b32);
# 3. the filled slots at 48K / 64K batch 1 and at head_dim 64, 32K batch 1 (2 + 31 as ours_alt);
# 4. with what is left, issue 7's whole table (4K-128K x 1 / 8 / 32 / 128).
set -u
T="$(date +%Y-%m-%d)_s46"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
rows() {  # $1 contexts, $2 batches, $3 tag, $4 more bench_decode arguments, $5 timeout (s)
  timeout "$5" python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts "$1" \
    --batches "$2" ${4:-} --out "$OUT/${T}_$3.json" > "$OUT/${T}_$3.log" 2>&1
  t "$3 rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_$3.log" | cut -c1-330
}
K=$(( $(left) - 300 )); [ $K -lt 260 ] && K=$(( $(left) - 20 < 260 ? $(left) - 20 : 260 ))  # the key rows take ~220 s
rows 131072,32768 1,32 key "--alt-splits 32768x1=2+31" $K
[ $(left) -gt 200 ] && variant_sweep 131072x1,32768x1 4,7,11 var_b1 $(( $(left) > 330 ? 150 : 90 ))
[ $(left) -gt 160 ] && variant_sweep 131072x32 0,7,10,11 var_b32 110
[ $(left) -gt 100 ] && rows 49152,65536 1 fill "--alt-splits 49152x1=2+31,65536x1=2+31" $(( $(left) - 50 ))
[ $(left) -gt 45 ] && rows 32768 1 fill_d64 "--head-dim 64 --alt-splits 32768x1=2+31" $(( $(left) - 5 ))
[ $(left) -gt 200 ] && { timeout $(( $(left) - 5 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton \
  --append-batches 1,256 --append-rotation fused --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1;
  t "table rc=$?"; grep -E "^L=|copy bandwidth|append cuda" "$OUT/${T}_table.log" | cut -c1-330; }
t done
