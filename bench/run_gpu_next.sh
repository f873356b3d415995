#!/bin/bash
# Next session's first device call (issues 7 and 8), < 10 min on one H200, from the repo root, carry [".whl"]:
#   bash bench/run_gpu_next.sh
# 1. Nsight Compute of the batch-1 decode (128K and 4K, variant 4): where the ~10 us fixed cost per call and
#    the 55%-of-copy load stream at 128K batch 1 come from (BENCHMARKS.md, third session).
# 2. Decode with programmatic dependent launch (--pdl 1) vs without, batch 1 and 32 (PDL measured for append only).
# 3. bench_model Qwen3-4B 128K batch 1 with fused projections and the new default variant (4 / 0).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T="$(date +%Y-%m-%d)_next"
WHL=$(ls .whl/flashinfer_python-*.whl .whl/apache_tvm_ffi-*.whl .whl/transformers-5.24.0-py3-none-any.whl 2>/dev/null | tr '\n' ' ')
[ -n "$WHL" ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site $WHL > /dev/null 2>&1
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST=9.0 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_next
export PYTHONPATH=/tmp/site:$PWD/src
T0=$(date +%s); t() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
for shape in "131072 1" "4096 1"; do
  timeout 100 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section LaunchStats --section SchedulerStats python3 bench/ncu_one.py $shape 4 >> "$OUT/${T}_ncu.txt" 2>&1
  t "ncu $shape rc=$?"
done
grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Stall|Registers|Waves" "$OUT/${T}_ncu.txt" | head -40
for pdl in 0 1; do
  timeout 120 python3 bench/bench_decode.py --pdl $pdl --no-flashinfer --no-triton --no-append --contexts 4096,131072 \
    --batches 1,32 --out "$OUT/${T}_decode_pdl$pdl.json" > "$OUT/${T}_decode_pdl$pdl.log" 2>&1
  t "decode pdl=$pdl rc=$?"; grep -E "^L=" "$OUT/${T}_decode_pdl$pdl.log"
done
timeout 200 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled --tput-context 0 \
  --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_fused.json" > "$OUT/${T}_bench_model_fused.log" 2>&1
t "bench_model 4b fused rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_fused.log" | cut -c1-420 | tail -6
