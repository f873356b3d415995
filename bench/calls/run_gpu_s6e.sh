#!/bin/bash
# Sixth session, device call E (review), < 4 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s6e.sh
# After the review refactor (one CTA-combine loop for the global and the cluster merge; the record layout's
# offsets from paged.tile16_record_offsets; fp16 scale check): GPU kernel tests and the paged cache tests.
set -u
T="$(date +%Y-%m-%d)_s6e"
source bench/gpu_env.sh
timeout 120 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|128K rel" "$OUT/${T}_tests.log" | tail -6
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/adversarial/test_nan_propagates.py \
  >> "$OUT/${T}_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -2
