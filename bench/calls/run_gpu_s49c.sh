#!/bin/bash
# Forty-ninth session, third call (one GPU, < 10 min, carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s49c.sh
# Why log8 records are 7% slower than fp16 records at 128K batch 1 (33.6-34.2 vs 31.2-31.6 us, variant 7) while 3%
# faster at batch 32: Nsight Compute on one call of each format at 128K batch 1, variant 7 (the plan's) and at 128K
# batch 32, variant 11: duration, issue activity, instructions, stall reasons; then the loop's stalls per SASS
# instruction at batch 1 (ncu_stalls.py).
set -u
T="$(date +%Y-%m-%d)_s49c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
for pt in "131072 1 7" "131072 32 11"; do
  for sf in float16 log8; do
    [ $(left) -gt 90 ] || break
    tag=$(echo $pt $sf | tr ' ' '_')
    timeout 120 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
      --section InstructionStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      python3 bench/ncu_one.py $pt $sf > "$OUT/${T}_ncu_${tag}.txt" 2>&1
    t "ncu $tag rc=$?"
    grep -E "^ +(Duration|Elapsed Cycles|SM Busy|Issue Slots Busy|Issued Ipc Active|Executed Ipc Active|Memory Throughput|DRAM Throughput|No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction|Executed Instructions|Registers Per Thread|Dynamic Shared Memory Per Block|Achieved Occupancy) " \
      "$OUT/${T}_ncu_${tag}.txt" | sed 's/  */ /g' | head -20
  done
done
for sf in float16 log8; do
  [ $(left) -gt 80 ] || break
  timeout 150 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
    python3 bench/ncu_one.py 131072 1 7 $sf > "$OUT/${T}_ncu_source_$sf.csv" 2>&1
  t "ncu source $sf rc=$?"
  python3 bench/ncu_stalls.py "$OUT/${T}_ncu_source_$sf.csv" --top 30 > "$OUT/${T}_stalls_$sf.txt" 2>&1
  head -16 "$OUT/${T}_stalls_$sf.txt" | cut -c1-300
  gzip -f "$OUT/${T}_ncu_source_$sf.csv"
done
t done
