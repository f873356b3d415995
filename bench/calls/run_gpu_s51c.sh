#!/bin/bash
# For the next session (one GPU, < 4 min, carry [".whl", ".kcache"]): why log8 records stay slower at 128K batch 1 even
# on variant 14 (paired 7: 141 SASS per tile against 198 on variant 7, and against 163 for fp16 records on 7; fiftieth
# session: log8 v14 33.7 us, v7 33.8-34.0, fp16 v7 31.9). Nsight Compute on one call each of log8 v14, log8 v7 and fp16
# v7 (the forty-ninth session's s49c profiled the last two: fp16 long_sb 16% of stalls, log8 5.8%, log8 issue-bound),
# then the loop's stalls per SASS instruction for log8 v14 (ncu_stalls.py).
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s51c.sh
set -u
T="$(date +%Y-%m-%d)_s51c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
for pt in "131072 1 14 log8" "131072 1 7 log8" "131072 1 7 float16"; do
  [ $(left) -gt 60 ] || break
  tag=$(echo $pt | tr ' ' '_')
  timeout 120 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section InstructionStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    python3 bench/ncu_one.py $pt > "$OUT/${T}_ncu_${tag}.txt" 2>&1
  t "ncu $tag rc=$?"
  grep -E "^ +(Duration|Issue Slots Busy|DRAM Throughput|No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction|Executed Instructions|Registers Per Thread|Achieved Occupancy) " \
    "$OUT/${T}_ncu_${tag}.txt" | sed 's/  */ /g' | head -12
done
if [ $(left) -gt 60 ]; then
  timeout 150 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
    python3 bench/ncu_one.py 131072 1 14 log8 > "$OUT/${T}_ncu_source_v14_log8.csv" 2>&1
  t "ncu source v14 log8 rc=$?"
  python3 bench/ncu_stalls.py "$OUT/${T}_ncu_source_v14_log8.csv" --top 30 > "$OUT/${T}_stalls_v14_log8.txt" 2>&1
  head -16 "$OUT/${T}_stalls_v14_log8.txt" | cut -c1-300
  gzip -f "$OUT/${T}_ncu_source_v14_log8.csv"
fi
t done
