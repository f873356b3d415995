#!/bin/bash
# Prepared in the twenty-first session for the next device call. One H200, < 10 min, carry [".whl", ".kcache"]
# (main's library prebuilt), run as  OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s22a.sh
# 1. the kernel GPU suite (the new default-rule test among them); 2. issue 8's Qwen3-4B 128K step ablation and its
# bound (never run: is 90% of the ideal 2.53x within physical reach?); 3. the 4B model table on this kernel (128K
# batch 1, equal memory at 32K; sixteenth session: 63% of the ideal, 4.69x), with the time left.
set -u
T="$(date +%Y-%m-%d)_s22a"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s22
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_kernel_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^E .*rel err|FAILED|passed|failed|rror" "$OUT/${T}_kernel_tests.log" | tail -6 | cut -c1-300
timeout 240 python3 bench/step_ablate.py --model qwen3-4b --context 131072 \
  --out "$OUT/${T}_ablate_4b.json" > "$OUT/${T}_ablate_4b.log" 2>&1
t "ablate 4B rc=$?"; grep -E "oscar |bf16 |OSCAR:|BOUND|rror" "$OUT/${T}_ablate_4b.log" | cut -c1-220
timeout $(left) python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled \
  --tput-context 32768 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-4b.json" \
  > "$OUT/${T}_bench_model_qwen3-4b.log" 2>&1
t "bench_model 4B rc=$?"; grep -E "oscar_compiled|bf16_compiled|equal|Error|error" "$OUT/${T}_bench_model_qwen3-4b.log" | cut -c1-260
