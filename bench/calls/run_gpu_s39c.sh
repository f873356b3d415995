#!/bin/bash
# Thirty-ninth session, branch s39-slices with the plan's merge-slices rule (CudaDecodeConfig.merge_slices=None: 8
# where one merger's threads would need a second L2 round trip, i.e. 128K batch 1's 33 splits; else 1). Any card, one
# GPU, < 10 min, carry [".whl", ".kcache"] (the tree's library prebuilt, the .cu as in s39b):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s39c.sh
# 1. the kernel GPU tests and the paged-cache / compiled-step / NaN GPU tests under the new default;
# 2. issue 7's 128K batch-1 row, every peer in the same run;
# 3. issue 8's step at 128K batch 1 (Qwen3-8B, step_ablate).
set -u
T="$(date +%Y-%m-%d)_s39c"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s39c
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
kernel_tests 170
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  tests/adversarial/test_nan_propagates.py > "$OUT/${T}_cache_tests.log" 2>&1
t "cache tests rc=$?"; tail -1 "$OUT/${T}_cache_tests.log"; grep -E "^FAILED" "$OUT/${T}_cache_tests.log" | head -5
[ $(left) -ge 100 ] && issue7_rows 131072 1 128k
[ $(left) -ge 120 ] && ablate_128k qwen3-8b
