#!/bin/bash
# Fifth session, device call B (issues 7, 8), < 10 min on one H200, from the repo root, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s5b.sh
# 1. Kernel tests (q staged in shared memory once per CTA; variants 8 / 9: four score chains).
# 2. Fixed-cost diagnosis after the q change; variants 0 / 4 / 8 / 9 at batch 1, 32, 59.
# 3. bench_model Qwen3-8B 128K b1 (fused projections; last measured unfused), Qwen3-4B equal-memory OSCAR
#    (pinned per-step upload: step vs replay at batch 59), profile of the 4B 128K compiled OSCAR step.
set -u
T="$(date +%Y-%m-%d)_s5b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s5b
timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log"
timeout 150 python3 bench/bench_decode.py --no-flashinfer --no-triton --no-append --contexts 131072 --batches 1 \
  --diag 131072x1:4,32768x1:4,131072x1:8 --sweep --sweep-points 131072x1,32768x1,131072x32,32768x59 \
  --sweep-variants 0,4,8,9 --sweep-scales 1.0 --out "$OUT/${T}_diag.json" > "$OUT/${T}_diag.log" 2>&1
t "diag rc=$?"; grep -E "^diag|^sweep|^L=|copy band" "$OUT/${T}_diag.log" | cut -c1-700
timeout 150 python3 bench/bench_model.py --models qwen3-4b --contexts "" --modes compiled --tput-context 32768 \
  --tput-methods oscar_compiled --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_4b_tput.json" \
  > "$OUT/${T}_bench_model_4b_tput.log" 2>&1
t "4b tput rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_4b_tput.log" | cut -c1-300 | tail -3
timeout 180 python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled --tput-context 0 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_8b.json" > "$OUT/${T}_bench_model_8b.log" 2>&1
t "8b rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_8b.log" | cut -c1-300 | tail -3
