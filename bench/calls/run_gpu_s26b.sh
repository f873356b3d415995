#!/bin/bash
# Twenty-sixth session, planned after run_gpu_s26a.sh (never run; run_gpu_s27a.sh ran in its place, with this script's 4B table). One GPU, < 10 min, carry [".whl", ".kcache"]:
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s26b.sh
# With the padded pages skipped: issue 8's Qwen3-4B table (128K batch 1 vs the ideal 2.53x; equal memory at 32K),
# then the Qwen3-8B 128K batch-1 step ablation (where the step goes; run_gpu_s25b.sh measured 0.366 ms of append
# with the padding), and with the time left the batch-1 bound on this card (read floor, records read, probes).
set -u
T="$(date +%Y-%m-%d)_s26b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s26
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 330 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled \
  --tput-context 32768 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-4b.json" \
  > "$OUT/${T}_bench_model_qwen3-4b.log" 2>&1
t "bench_model 4B rc=$?"; grep -E "oscar_compiled|bf16_compiled|equal|Error|error" "$OUT/${T}_bench_model_qwen3-4b.log" | cut -c1-400
timeout $(( $(left) - 5 )) python3 bench/step_ablate.py --model qwen3-8b --context 131072 --bf16-backends CUDNN_ATTENTION \
  --out "$OUT/${T}_ablate_8b.json" > "$OUT/${T}_ablate_8b.log" 2>&1
t "ablate 8B rc=$?"; grep -E "oscar |bf16 |OSCAR:|BOUND|rror" "$OUT/${T}_ablate_8b.log" | cut -c1-220
# with the time left: the batch-1 bound on this card (read floor of the bytes, the pool's records read as the
# kernel reads them, the fixed cost of a call by early-return probes) at 128K and 32K, variant 4
timeout $(( $(left) - 3 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts "" --read-floor 131072x1,32768x1 --read-records 131072x1,32768x1 --diag 131072x1:4,32768x1:4 \
  --out "$OUT/${T}_bound.json" > "$OUT/${T}_bound.log" 2>&1
t "batch-1 bound rc=$?"; grep -E "^read|^diag|rror" "$OUT/${T}_bound.log" | cut -c1-300
