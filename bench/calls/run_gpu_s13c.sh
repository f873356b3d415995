#!/bin/bash
# Thirteenth session, device call C (issue 7), < 6 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s13c.sh
# The u8-K kernel (eleventh session) has not been profiled: instructions executed per tile, issue
# efficiency, pipe use and stall reasons at 128K batch 32 (variant 0) and batch 1 (variant 4), and the
# per-SASS-instruction stall samples (source page) at batch 32: the data for the next kernel design.
set -u
T="$(date +%Y-%m-%d)_s13c"
source bench/gpu_env.sh
M="sm__inst_issued.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,smsp__cycles_active.avg"
M="$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,gpu__time_duration.sum"
M="$M,regex:^sm__inst_executed_pipe_[a-z_]+\.avg\.pct_of_peak_sustained_active$"
M="$M,regex:^sm__pipe_[a-z_]+_cycles_active\.avg\.pct_of_peak_sustained_active$"
for pt in "131072 32 0" "131072 1 4"; do
  timeout 120 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 --metrics "$M" \
    --section WarpStateStats python3 bench/ncu_one.py $pt >> "$OUT/${T}_ncu.txt" 2>&1
  t "ncu $pt rc=$?"
done
grep -E "pipe|inst_issued|per_second|cycles_active|dram__|inst_executed.sum|duration|Stall|Warp Cycles" "$OUT/${T}_ncu.txt" \
  | grep -v " 0$\| 0\.00$\|(!)" | cut -c1-140 | head -80
timeout 150 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
  python3 bench/ncu_one.py 131072 32 0 > "$OUT/${T}_ncu_source_131072_32_0.csv" 2>&1
t "ncu source rc=$?"
python3 bench/ncu_stalls.py "$OUT/${T}_ncu_source_131072_32_0.csv" --top 40
gzip -f "$OUT/${T}_ncu_source_131072_32_0.csv"
