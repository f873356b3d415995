#!/bin/bash
# Prepared in the seventeenth session, not yet run. One H200, < 10 min, right after bench/calls/run_gpu_next.sh on the warm
# machine, carry [".whl", ".kcache"]:   bash bench/calls/run_gpu_next2.sh
# Issue 8's 128K generate against the references after the fixes (seventeenth session, call c: paged CUDA 6.8% from
# the exact reference, paged Triton 5.5%, the references ~5% apart), and the fold interval's precision / cost once
# more with the corrected reference (flat softmax, 4 vs 8 tiles: build bench/alt_int2_paged_f4.cu with sed on the
# OSCAR_FLUSH_TILES define and prebuild it into .kcache first, or drop --alt-src).
set -u
T="$(date +%Y-%m-%d)_next2"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_next
timeout 240 python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --generate-refs reference_exact,reference_q8,paged_triton --steps 5 \
  --out "$OUT/${T}_generate_128k.json" > "$OUT/${T}_generate_128k.log" 2>&1
t "generate 128K rc=$?"; python3 -c "
import json; d=json.load(open('$OUT/${T}_generate_128k.json'))['generate_long']
print({k: round(v, 4) for k, v in d['max_rel_logit_diff'].items()})"
ALT=""; [ -f bench/alt_int2_paged_f4.cu ] && ALT="--alt-src bench/alt_int2_paged_f4.cu"
timeout $(( 585 - $(date +%s) + T0 )) python3 bench/diag_decode_precision.py --test-case --contexts 8192,131072 --score-std 1,3 \
  --splits 1 $ALT --time-shapes 131072x32,32768x32,65536x8 --out "$OUT/${T}_precision.json" > "$OUT/${T}_precision.log" 2>&1
t "precision rc=$?"; grep -v -i warn "$OUT/${T}_precision.log" | grep -v "ref rounded\|ref int8 query  " | cut -c1-230 | tail -40
