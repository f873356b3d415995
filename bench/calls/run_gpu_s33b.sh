#!/bin/bash
# Thirty-third session: work stealing in the INT2 tier (CudaDecodeConfig.steal). Any card, one GPU, < 10 min, carry
# [".whl", ".kcache"] (the kernel and its trace build prebuilt on the CPU machine).
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s33b.sh
# Ran once (thirty-third session, commit 37f316e, H100): stealing was 25-66% slower at 128K batch 1 and was removed;
# to run it again, apply bench/results/2026-12-05_s33_work_stealing.patch first (main has no --steal).
# Why: run_gpu_s33.sh's per-CTA trace of 128K batch 1 (H100) has the SMs' loop ends at 43.0 / 46.8 / 49.5 us
# (10% / median / last) with equal tiles per split; the same SMs at their own rates, sharing the work, would all end
# by ~46.5 (3.0 us earlier; 32K: 0.6 us). With steal = s each warp takes its share of the first s % of the tiles,
# then claims the rest one tile at a time.
# 1. the CUDA kernel tests (the stealing test among them); 2. steal 0 / 50 / 70 / 85 alternating, three rounds, at
# 128K / 32K batch 1 (plan's variant 4; round 1 also variant 5); 3. the trace with the best-looking share (70).
set -u
T="$(date +%Y-%m-%d)_s33b"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "GPU kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log" | cut -c1-200
grep -E "^FAILED|^ERROR|Error" "$OUT/${T}_tests.log" | head -8 | cut -c1-300
mkdir -p /tmp/ab
st() {  # $1 steal, $2 round, $3 variants
  timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton \
    --no-append --steal $1 --sweep --sweep-variants $3 --sweep-scales 1.0 --sweep-points 131072x1,32768x1 \
    > "/tmp/ab/${T}_steal$1_$2.log" 2>&1
  echo "steal $1 round $2 rc=$?: $(grep -E '^sweep' "/tmp/ab/${T}_steal$1_$2.log" | sed 's/sweep L=//' | cut -c1-60 | tr '\n' ';')"
}
for r in 1 2 3; do
  vs=4; [ $r = 1 ] && vs=4,5
  for s in 0 70 50 85; do st $s $r $vs; done
done | tee "$OUT/${T}_ab.txt"
t "A/B done"
(cd /tmp/ab && tar czf "$OUT/${T}_ab_logs.tgz" .)
[ $(left) -gt 60 ] && timeout $(( $(left) - 5 )) python3 bench/trace_decode.py --points 131072x1,32768x1 \
  --modes no_pdl,b2b --steal 70 --out "$OUT/${T}_trace70.json" > "$OUT/${T}_trace70.log" 2>&1
t "trace steal 70 rc=$?"; grep -E "^trace|rror" "$OUT/${T}_trace70.log" | cut -c1-600
