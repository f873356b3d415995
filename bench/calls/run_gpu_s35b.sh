#!/bin/bash
# Ran in the thirty-fifth session as `OSCARKV_COMMIT=8337cdb bash bench/calls/run_gpu_s35b.sh` (branch onepass-merge) on
# an H100 80GB HBM3; the one-pass merge was not taken (BENCHMARKS.md, thirty-fifth session). To run it again, apply
# bench/results/2026-12-06_s35_onepass_merge.patch to the tree first (main's kernel no longer has the change).
# Any card, one GPU, < 10 min, carry [".whl", ".kcache", ".alt/int2_paged_main_cbb5c5b.cu"]:
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s35b.sh
# The one-pass split merge (this tree's int2_paged.cu) against main's kernel (.alt/int2_paged_main_cbb5c5b.cu =
# `git show cbb5c5b:src/oscarkv/kernels/cuda/int2_paged.cu`; prebuilt 254acd31..., main's trace fb918a97...).
# Why: the H200 trace of this session (2026-12-06_s35h_trace_main.log) puts the end of a 128K batch-1 call 4.3 us after
# the last warp's loop end, 2.8 us of it in the merging CTA's three dependent steps after the arrival (LSEs into shared
# memory 0.9, weights 0.8, weighted sum with a second L2 round trip for splits past the 12 in flight 1.1); the new merge
# loads each thread's partials and LSEs together (17 in flight: 33 splits over two groups in one trip) and folds
# them in registers, one barrier instead of three.
# 1. GPU kernel tests of the new kernel; 2. main / new alternating, three rounds, 128K / 32K batch 1 (plan's variant 4
# grid), 128K batch 32 (variant 11) in round 1; 3. the new kernel's trace (b2b, no PDL) while time is left.
set -u
T="$(date +%Y-%m-%d)_s35b"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
MAIN=$PWD/.alt/int2_paged_main_cbb5c5b.cu
[ -f "$MAIN" ] || { echo "no $MAIN (carry it)"; exit 2; }
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "GPU kernel tests (one-pass merge) rc=$?"; tail -1 "$OUT/${T}_tests.log" | cut -c1-200
grep -E "^FAILED|^ERROR" "$OUT/${T}_tests.log" | head -8 | cut -c1-300
mkdir -p /tmp/ab
for r in 1 2 3; do
  for k in main new; do
    [ $(left) -lt 60 ] && break
    src=""; [ $k = main ] && src=$MAIN
    OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" \
      --no-flashinfer --no-triton --no-append --sweep --sweep-variants 4 --sweep-scales 1.0 \
      --sweep-points 131072x1,32768x1 > "/tmp/ab/${T}_${k}_$r.log" 2>&1
    echo "$k round $r: $(grep -E '^sweep' "/tmp/ab/${T}_${k}_$r.log" | sed 's/sweep L=//' | cut -c1-60 | tr '\n' ';')"
    [ $r = 1 ] && [ $(left) -gt 90 ] && OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 \
      --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append --sweep --sweep-variants 11 \
      --sweep-scales 1.0 --sweep-points 131072x32 2>&1 | grep -E "^sweep" | sed "s/^/$k b32: /" | cut -c1-80
  done
done | tee "$OUT/${T}_ab.txt"
t "A/B done"
(cd /tmp/ab && tar czf "$OUT/${T}_ab_logs.tgz" .)
[ $(left) -gt 60 ] && timeout $(( $(left) - 5 )) python3 bench/trace_decode.py --points 131072x1,32768x1 \
  --modes no_pdl,b2b --out "$OUT/${T}_trace.json" > "$OUT/${T}_trace.log" 2>&1
t "trace (one-pass merge) rc=$?"; grep -E "^trace|SM loop|rror" "$OUT/${T}_trace.log" | cut -c1-600
