#!/bin/bash
# Fifty-first session, fourth H100 call (carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s51f.sh
# the plan's picks after run_gpu_s51d/e's sweeps (fp16 32 pairs 10 from 2304 tiles; log8 32 pairs 10 below 1536 and
# from 5120 tiles) through DecodePlan, then issue 7's headline rows with every peer, fp16 and log8 records.
set -u
T="$(date +%Y-%m-%d)_s51f"
source bench/gpu_env.sh
start_call
issue7_rows 131072,98304,40960,16384 4 plan "--no-flashinfer --also-log8"
[ $(left) -gt 120 ] && issue7_rows 131072,32768 32,1 key --also-log8
t done
(cd "$OUT" && tar czf "${T}_all.tar.gz" --remove-files ${T}_*.log ${T}_*.json 2>/dev/null); ls "$OUT"
