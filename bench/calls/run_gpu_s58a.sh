#!/bin/bash
# Prepared in the fifty-seventh session; not run in the fifty-eighth (six requests got no machine, 901 s of device
# time, then new loans were paused) nor in the fifty-ninth (loans paused from its start: no request made). For the
# next session, H100 or H200: carry [".whl", ".kcache/45dc6da2faedfb22"]
# (main's library, built on the CPU machine with `OSCARKV_KERNEL_CACHE=$PWD/.kcache .venv/bin/python -c "from
# oscarkv.kernels import cuda_ops; cuda_ops.build()"`; check that the key printed by the first line here is the carried
# one):
#   BUDGET=540 OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s58a.sh
# Question: do the 16-warp CTAs (variants 5 / 6: one CTA per SM, 4- / 8-deep rings, half the splits of 4 / 7, so the
# last CTA merges 16 partials instead of 33) beat the plan's 8-warp variants at batch 1 since the lean end (fifty-third
# session)? Last measured in the thirty-third session, before it: variant 5 at 1 + 15 was 0.4-0.7 us faster than 4 at
# 2 + 31 at 128K batch 1 (35.6 vs 36.0 us) and slower at 32K (15.3 vs 14.9); the plan then moved 128K to variant 7
# (30.3-30.6 us today), against which 5 / 6 were not timed. 128K batch 1 needs <= 30.1 us for 6x FlashInfer BF16,
# 32K batch 1 <= 13.3 for 4x. Two rounds of the sweep (variants 4 / 5 / 6 / 7 at 32K 2 + 14 / 1 + 15 and 128K 2 + 31 /
# 2 + 14 / 1 + 15), then issue 7's batch-1 rows with every peer on the faster 16-warp variant of each context
# (bench_decode --variant: the plan's split counts for it), then the GPU kernel tests. On an H200 issue 7's rows on the
# plan as it stands come first.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s58a}"
source bench/gpu_env.sh
start_call
# on an H200 (not run with main's kernel since the thirty-fifth session; issue 7's table was measured there) first
# issue 7's rows on the plan as it stands
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && \
  issue7_rows 131072,32768 32,1 key_h200 "--also-log8 --read-floor 131072x1,32768x1"
PTS="--sweep-splits 32768x1=2+14,32768x1=1+15,131072x1=2+31,131072x1=2+14,131072x1=1+15"
for r in 1 2; do variant_sweep 32768x1 4,5,6,7 "w16_$r" 20 "$PTS"; done
# the faster of variants 5 / 6 at context $1: the lowest time of any of its lines in either round ("sweep L=... B=1
# variant V splits S: X us"); 5 if neither ran
best16() {
  cat "$OUT/${T}"_w16_*.log 2>/dev/null | awk -v L="L=$1" '$1 == "sweep" && $2 == L && ($5 == 5 || $5 == 6) {
    if (!($5 in m) || $8 < m[$5]) m[$5] = $8 }
    END { b = 5; if ((6 in m) && (!(5 in m) || m[6] < m[5])) b = 6; print b }'
}
V128=$(best16 131072); V32=$(best16 32768); t "16-warp variants: 128K $V128, 32K $V32"
if [ "$V128" = "$V32" ]; then
  [ $(left) -gt 170 ] && issue7_rows 131072,32768 1 "b1_v$V128" "--variant $V128 --read-floor 131072x1,32768x1"
else
  [ $(left) -gt 250 ] && issue7_rows 131072 1 "b1_v$V128" "--variant $V128 --read-floor 131072x1"
  [ $(left) -gt 170 ] && issue7_rows 32768 1 "b1_v$V32" "--variant $V32 --read-floor 32768x1"
fi
[ $(left) -gt 170 ] && kernel_tests $(( $(left) - 20 ))
t done
pack_out
