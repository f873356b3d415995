#!/bin/bash
# Fifty-first session, second H100 call (one GPU, < 10 min, carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s51d.sh
# 1. the plan's new picks (VARIANT_RULES after run_gpu_s51.sh's sweeps) through DecodePlan, fp16 and log8 records:
#    32 pairs at 16K-64K (fp16: 14 / 7 / 10), 64 pairs at 16K (log8: 10), 472 / 1024 pairs at 32K (log8: 11);
# 2. sweeps, two rounds: log8 records at 32 pairs, 64K-128K, with 10 (never timed on log8 at 32 pairs) beside 0 / 11 /
#    14; fp16 at 32 pairs, 48K / 64K (where 7 gives way to 10: 3072 tiles);
# 3. issue 8's equal-memory throughput of the 8B, fp16 and log8 records in one call (the s51b log8 rows had no fp16
#    row beside them).
# The device returns at most 8 files: every log and JSON is packed into one tarball at the end.
set -u
T="$(date +%Y-%m-%d)_s51d"
source bench/gpu_env.sh
start_call
issue7_rows 65536,49152,32768,16384 4 plan4 "--no-flashinfer --also-log8"
issue7_rows 16384 8 plan8 "--no-flashinfer --also-log8"
issue7_rows 32768 59,128 planbig "--no-flashinfer --also-log8"
for r in 1 2; do
  [ $(left) -gt 260 ] || break
  variant_sweep 131072x4,98304x4,65536x4 0,10,11,14 var_log8_b4_$r 240 "--scale-dtype log8"
  variant_sweep 65536x4,49152x4 4,7,10,14 var_fp16_b4_$r 240
done
[ $(left) -gt 200 ] && eq_memory qwen3-8b 8b_fp16
[ $(left) -gt 100 ] && eq_memory qwen3-8b 8b_log8 "--scale-dtype log8"
t done
(cd "$OUT" && tar czf "${T}_all.tar.gz" --remove-files ${T}_*.log ${T}_*.json 2>/dev/null); ls "$OUT"
