#!/bin/bash
# Sixteenth session, call c (right after b, on the warm machine). < 10 min, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s16c.sh
# (1) issue 8's 128K check: model.generate on the paged cache (a real 131,072-token prefill) against references
# that reproduce the kernel's int8 query ("reference_q8", "reference_exact_q8") and the exact-q reference;
# (2) issue 7: the split sweep under split-major dispatch (bench/calls/run_gpu_split_sweep.sh), data to refit the model.
set -u
T="$(date +%Y-%m-%d)_s16c"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s16
timeout 330 python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --generate-refs reference_q8,reference_exact_q8,reference_exact --steps 5 \
  --out "$OUT/${T}_generate_128k.json" > "$OUT/${T}_generate_128k.log" 2>&1
t "generate 128K rc=$?"; grep -v -i "warn" "$OUT/${T}_generate_128k.log" | grep -i -E "generate|rel|agree|token|Error" | cut -c1-300 | tail -12
timeout $(( 585 - $(date +%s) + T0 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts "" --sweep --sweep-variants 0,4 --sweep-scales 0.5,0.75,1.0,1.5,2.0,3.0 \
  --sweep-points 8192x8,16384x4,32768x4,32768x8,32768x16,65536x4,65536x8,65536x16,131072x2,131072x4,131072x16 \
  --out "$OUT/${T}_split_sweep.json" > "$OUT/${T}_split_sweep.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep" "$OUT/${T}_split_sweep.log" | cut -c1-250
