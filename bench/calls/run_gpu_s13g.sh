#!/bin/bash
# Thirteenth session, device call G, < 6 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s13g.sh
# Every GPU test of the package on the session's final tree (decode kernel unchanged; the library gained the
# records-read probe kernel, so it was rebuilt).
set -u
T="$(date +%Y-%m-%d)_s13g"
source bench/gpu_env.sh
timeout 330 python3 -m pytest -q tests/kernels tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py \
  tests/adversarial > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -8 | cut -c1-300
