#!/bin/bash
# Fourth session, device call B (issue 7), < 10 min on one H200, from the repo root, carry [".whl"]:
#   bash bench/calls/run_gpu_s4b.sh
# 1. GPU kernel tests (acq_rel merge counter, partial loads issued with the LSE loads, PDL on by default).
# 2. Fixed-cost diagnosis again (same points as call A) + the table with FlashInfer BF16 / FP8 and
#    append, head_dim 64; SM clock / power sampled during the table (sustained-load clocks).
# 3. Nsight Compute stall reasons and tensor-pipe use of the INT2 loop at 128K batch 1 and 32.
set -u
T="$(date +%Y-%m-%d)_s4b"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,driver_version --format=csv > "$OUT/${T}_gpu.txt" 2>&1
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; tail -2 "$OUT/${T}_tests.log"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 > "$OUT/${T}_clocks.csv" 2>&1 &
SMI=$!
timeout 290 python3 bench/bench_decode.py --contexts 4096,32768,131072 --batches 1,8,32 --append-batches 1,8,256 \
  --diag 4096x1:4,32768x1:4,131072x1:4,131072x1:5 --out "$OUT/${T}_bench_d128.json" > "$OUT/${T}_bench_d128.log" 2>&1
t "table rc=$?"; grep -E "^diag|^L=|append|launch floor|copy band|accuracy" "$OUT/${T}_bench_d128.log" | cut -c1-330
BENCH_MIN_CALLS=1 timeout 40 python3 bench/bench_decode.py --no-flashinfer --no-triton --no-append --contexts 131072 \
  --batches 32 --out "$OUT/${T}_b32_mincalls1.json" > "$OUT/${T}_b32_mincalls1.log" 2>&1
t "b32 min_calls=1 rc=$?"; grep -E "^L=" "$OUT/${T}_b32_mincalls1.log" | cut -c1-120
kill $SMI 2>/dev/null
timeout 60 python3 bench/bench_decode.py --head-dim 64 --no-flashinfer --no-triton --no-append --contexts 32768,131072 \
  --batches 1,32 --out "$OUT/${T}_bench_d64.json" > "$OUT/${T}_bench_d64.log" 2>&1
t "d64 rc=$?"; grep -E "^L=" "$OUT/${T}_bench_d64.log" | cut -c1-200
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|sm__pipe_tensor_op_hmma_cycles_active\.avg\.pct_of_peak_sustained_active|sm__inst_executed_pipe_tensor_op_hmma\.avg\.pct_of_peak_sustained_active|smsp__issue_active\.avg\.pct_of_peak_sustained_active|gpu__time_duration\.sum|smsp__inst_executed\.sum|dram__throughput\.avg\.pct_of_peak_sustained_elapsed'
for shape in "131072 1 4" "131072 32 0"; do
  timeout 60 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 --metrics "$M" \
    python3 bench/ncu_one.py $shape >> "$OUT/${T}_ncu.txt" 2>&1
  t "ncu $shape rc=$?"
done
grep -vE "^==|^\[" "$OUT/${T}_ncu.txt" | awk '$NF+0 > 0.05 || /int2_decode|duration|inst_executed|hmma|issue_active|dram/' | cut -c1-140 | head -70
