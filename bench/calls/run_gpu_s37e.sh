#!/bin/bash
# Thirty-seventh session, last call (after s37c / s37d, run inline: splits of variant 7, merge / CTA-order options).
# The plan's per-card VARIANT_RULES from the s37 / s37b sweeps; .kcache as run_gpu_s37.sh. Within the budget:
# the rule's GPU test, then issue 7's rows at 64K and 16K with every peer under the new plan.
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s37e.sh
set -u
T="$(date +%Y-%m-%d)_s37e"
source bench/gpu_env.sh
timeout 40 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py -k default_variant > "$OUT/${T}_tests.log" 2>&1
t "rule test rc=$?"; tail -1 "$OUT/${T}_tests.log"
issue7_rows 65536 1,8,32 64k
[ $(left) -ge 50 ] && issue7_rows 16384 1,8,32 16k
