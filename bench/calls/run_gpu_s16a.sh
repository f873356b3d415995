#!/bin/bash
# Sixteenth session, call a. One H200, < 10 min, carry [".whl", ".kcache"]:   bash bench/calls/run_gpu_s16a.sh
# (1) GPU tests on the fifteenth session's final tree (new since the last GPU run: the CUDA append reads strided
# k/v views; the paged step equals the int8-query torch reference over 128 tokens); (2) issue 7 energy at 128K
# batch 32: records read alone vs the loads-only probe (bench/calls/run_gpu_energy2.sh); (3) issue 8 attribution: where
# the Qwen3-8B 128K batch-1 compiled step goes, OSCAR and BF16 in one process (bench/profile_step.py).
set -u
T="$(date +%Y-%m-%d)_s16a"
source bench/gpu_env.sh
timeout 220 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py \
  tests/cache/test_compiled_step.py > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -5 | cut -c1-300
timeout 50 python3 bench/clock_probe.py 131072 32 0 --modes 0,1,-1,-4,-5 --seconds 3 > "$OUT/${T}_energy_b32.log" 2>&1
t "energy b32 rc=$?"; grep -E "^L=|Error" "$OUT/${T}_energy_b32.log"
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s16
timeout $(( 575 - $(date +%s) + T0 )) python3 bench/profile_step.py --model qwen3-8b --context 131072 --modes compiled \
  --fuse-projections --out "$OUT/${T}_profile_8b.json" > "$OUT/${T}_profile_8b.log" 2>&1
t "profile rc=$?"; grep -v -i "warn" "$OUT/${T}_profile_8b.log" | cut -c1-260 | tail -40
