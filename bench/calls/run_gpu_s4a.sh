#!/bin/bash
# Fourth session, device call A (issue 7), < 10 min on one H200, from the repo root, carry [".whl"]:
#   bash bench/calls/run_gpu_s4a.sh
# 1. GPU kernel tests (new 16-warp / 8-warp deep-ring variants 5-7, merge over thread groups, hp prefetch).
# 2. Fixed-cost diagnosis (bench_decode --diag: INT2 tier / hp tier emptied, one hp tile per warp) and a
#    sweep of the batch-1 variants and split counts; graphs now hold >= 32 calls (replay latency amortized).
# 3. Nsight Compute of the 128K batch-1 call (variants 4 and 5): kernel duration without launch overhead.
# 4. Decode with and without programmatic dependent launch.
set -u
T="$(date +%Y-%m-%d)_s4a"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/${T}_gpu.txt" 2>&1
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -2 "$OUT/${T}_tests.log"
timeout 200 python3 bench/bench_decode.py --no-flashinfer --no-triton --no-append --contexts 131072 --batches 1,32 \
  --diag 4096x1:4,4096x1:5,32768x1:4,131072x1:4,131072x1:5 \
  --sweep --sweep-points 131072x1,32768x1,4096x1,131072x32 --sweep-variants 0,4,5,6,7 --sweep-scales 0.5,0.75,1.0 \
  --out "$OUT/${T}_diag.json" > "$OUT/${T}_diag.log" 2>&1
t "diag+sweep rc=$?"; grep -E "^diag|^sweep|^L=|copy band" "$OUT/${T}_diag.log" | cut -c1-200
for v in 4 5; do
  timeout 75 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section LaunchStats --section SchedulerStats python3 bench/ncu_one.py 131072 1 $v >> "$OUT/${T}_ncu.txt" 2>&1
  t "ncu v$v rc=$?"
done
grep -E "int2_decode|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers|Dynamic Shared|Grid Size|Stall" "$OUT/${T}_ncu.txt" | cut -c1-150 | head -50
for pdl in 0 1; do
  timeout 60 python3 bench/bench_decode.py --pdl $pdl --no-flashinfer --no-triton --no-append --contexts 4096,32768,131072 \
    --batches 1,32 --out "$OUT/${T}_pdl$pdl.json" > "$OUT/${T}_pdl$pdl.log" 2>&1
  t "decode pdl=$pdl rc=$?"; grep -E "^L=" "$OUT/${T}_pdl$pdl.log" | cut -c1-110
done
