#!/bin/bash
# Prepared in the eighteenth session (no device lent then). One H200, < 10 min, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s19b.sh
# Issue 8's batch-1 target for the Qwen3-4B architecture (90% of the ideal 2.53x): is it within reach at all? The
# replay-time ablation of the 4B's 128K step (never run: sixteenth session, device time). The BF16 step without
# attention (attention returns zeros) is the part both methods share; with OSCAR's INT2 bytes at copy bandwidth
# and nothing else added, shared + INT2 bytes / copy bandwidth is the fastest OSCAR step the model allows: if the
# BF16 step over that is below 90% of the ideal, the target is out of reach by measurement (the 8B's bound is in
# BENCHMARKS.md, sixteenth session: 90% needs issue 7's 23 us and no per-layer overhead).
set -u
T="$(date +%Y-%m-%d)_s19b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s19
timeout $(( 585 - $(date +%s) + T0 )) python3 bench/step_ablate.py --model qwen3-4b --context 131072 \
  --out "$OUT/${T}_ablate_4b.json" > "$OUT/${T}_ablate_4b.log" 2>&1
t "ablate 4B rc=$?"; grep -E "oscar |bf16 |OSCAR:|BF16|copy|rror" "$OUT/${T}_ablate_4b.log" | cut -c1-220
