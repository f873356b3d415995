#!/bin/bash
# Fifty-first session, third H100 call (warm after run_gpu_s51d.sh; carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s51e.sh
# sweeps, two rounds: fp16 at 400+ pairs (32K b59 / b128: the thirty-seventh session's 7 against 11, which won there on
# log8), log8 at 32 pairs at 16K (the plan's 4 gave 25.9 us against fp16's 22.2 on 14) and both formats at 40K b4
# (where 7 gives way to 10 at 32 pairs); then issue 8's equal-memory throughput of the 4B, fp16 and log8 records.
set -u
T="$(date +%Y-%m-%d)_s51e"
source bench/gpu_env.sh
start_call
for r in 1 2; do
  [ $(left) -gt 240 ] || break
  variant_sweep 32768x59,32768x128 0,7,10,11 var_fp16_big_$r 220
  variant_sweep 16384x4,40960x4 0,4,7,10,11,14 var_log8_b4_$r 220 "--scale-dtype log8"
  variant_sweep 40960x4 4,7,10,11,14 var_fp16_b4_$r 220
done
[ $(left) -gt 200 ] && eq_memory qwen3-4b 4b_fp16
[ $(left) -gt 100 ] && eq_memory qwen3-4b 4b_log8 "--scale-dtype log8"
t done
(cd "$OUT" && tar czf "${T}_all.tar.gz" --remove-files ${T}_*.log ${T}_*.json 2>/dev/null); ls "$OUT"
