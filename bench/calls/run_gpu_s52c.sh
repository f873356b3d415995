#!/bin/bash
# Fifty-second session, an H100 (carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s52c.sh
# Which batch-1 variant is fastest inside the model step (issue 8), not back to back: s51g found log8 records on
# variant 14 (the plan's pick at 128K batch 1) 2 us slower than on 4 with PDL off (38.8-39.3 vs 36.8-37.0 us) though
# tied back to back, and the decode in the step costs about its PDL-off time (decode_chain, thirty-first session).
# Qwen3-8B at 128K batch 1 (bench_model, compiled step replayed, BF16 with cuDNN in each run), forcing the variant:
# fp16 records 7 / 4, log8 records 14 / 4, then a second round in the reverse order with what is left.
set -u
T="$(date +%Y-%m-%d)_s52c"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s52
start_call
one() {  # $1 tag, $2 variant, $3 more bench_model arguments
  [ $(left) -ge 80 ] || return
  timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
    --tput-context 0 --fuse-projections --steps 20 --compiled-bf16-backends CUDNN_ATTENTION --decode-variant $2 ${3:-} \
    --out "$OUT/${T}_$1.json" > "$OUT/${T}_$1.log" 2>&1
  t "$1 rc=$?"; grep -E "rror" "$OUT/${T}_$1.log" | tail -2 | cut -c1-250
  [ -s "$OUT/${T}_$1.json" ] && _batch1_summary "$OUT/${T}_$1.json" | head -1
}
one fp16_v7_1 7; one fp16_v4_1 4; one log8_v14_1 14 "--scale-dtype log8"; one log8_v4_1 4 "--scale-dtype log8"
one log8_v4_2 4 "--scale-dtype log8"; one log8_v14_2 14 "--scale-dtype log8"; one fp16_v4_2 4; one fp16_v7_2 7
t done
pack_out
