#!/bin/bash
# Seventh session, device call B (issues 7, 8), < 10 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s7b.sh
# 1. Where the INT2 loop's cycles go: Nsight Compute pipe utilisation (ALU / FMA / tensor / XU / shared),
#    issue slots and warp stalls of one call at 128K batch 32 (variant 0) and 128K batch 1 (variant 4).
# 1b. Loads only (INT2 math left out) with deeper rings (variants 7, 6, 1) at batch 1: does the stream get
#    closer to the read floor with more bytes in flight per SM?
# 2. The SM clock under the sustained batch-32 load (nvidia-smi every 200 ms during the timed calls).
# 3. Model level with the record kernel: Qwen3-4B equal KV memory at 32K (OSCAR and BF16 in one run),
#    and where the Qwen3-4B 128K batch-1 OSCAR step's kernel time goes (bench/profile_step.py, compiled).
set -u
T="$(date +%Y-%m-%d)_s7b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s7b
M="sm__inst_issued.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,smsp__cycles_active.avg"
M="$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum"
M="$M,regex:^sm__inst_executed_pipe_[a-z_]+\.avg\.pct_of_peak_sustained_active$"
M="$M,regex:^sm__pipe_[a-z_]+_cycles_active\.avg\.pct_of_peak_sustained_active$"
for pt in "131072 32 0" "131072 1 4"; do
  timeout 120 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 --metrics "$M" \
    --section WarpStateStats python3 bench/ncu_one.py $pt >> "$OUT/${T}_ncu.txt" 2>&1
  t "ncu $pt rc=$?"
done
grep -E "pipe|inst_issued|per_second|cycles_active|dram__|inst_executed.sum|Stall|Warp Cycles" "$OUT/${T}_ncu.txt" \
  | grep -v " 0$\| 0\.00$\|(!)" | cut -c1-140 | head -70
timeout 120 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 4096 --batches 1 --probe --probe-points 131072x1,32768x1 --probe-variants 4,7,6,1 \
  --out "$OUT/${T}_probe.json" > "$OUT/${T}_probe.log" 2>&1
t "probe rc=$?"; grep -E "^probe|Error" "$OUT/${T}_probe.log" | cut -c1-300
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit --format=csv -lms 200 > "$OUT/${T}_clocks.csv" 2>&1 &
SMI=$!
timeout 100 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 131072 --batches 32 --out "$OUT/${T}_b32.json" > "$OUT/${T}_b32.log" 2>&1
t "b32 rc=$?"; grep -E "^L=" "$OUT/${T}_b32.log" | cut -c1-200
kill $SMI; awk -F', ' 'NR>1 {split($2,a," "); s+=a[1]; n++; if (a[1]<mn||mn=="") mn=a[1]} END {print "SM clock samples", n, "mean", s/n, "MHz, min", mn}' "$OUT/${T}_clocks.csv"
timeout 230 python3 bench/bench_model.py --models qwen3-4b --contexts "" --modes compiled --tput-context 32768 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_4b_tput.json" > "$OUT/${T}_bench_model_4b_tput.log" 2>&1
t "4b tput rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_4b_tput.log" | cut -c1-400 | tail -4
timeout 200 python3 bench/profile_step.py --model qwen3-4b --context 131072 --modes compiled --methods oscar \
  --fuse-projections --out "$OUT/${T}_profile_4b.json" > "$OUT/${T}_profile_4b.log" 2>&1
t "profile rc=$?"; grep -v -i "warn" "$OUT/${T}_profile_4b.log" | cut -c1-400 | head -30
