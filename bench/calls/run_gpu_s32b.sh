#!/bin/bash
# Thirty-second session (written then; ran in the thirty-third, 2026-12-05 21:33 UTC on an H200 at 3e88551: BENCHMARKS.md). One GPU,
# < 10 min, carry [".whl", ".kcache", ".alt"]. Prepare here, from the repo root (the patched source, then both kernel
# libraries prebuilt into .kcache, ~100 s each; without them the device builds each at first use, ~40 s):
#   mkdir -p .alt && patch -s -o .alt/int2_paged_bf16.cu src/oscarkv/kernels/cuda/int2_paged.cu \
#     < bench/results/2026-12-05_s32_bf16_partials.patch
#   for s in "" $PWD/.alt/int2_paged_bf16.cu; do PATH=/usr/local/cuda/bin:$PATH OSCARKV_KERNEL_CACHE=$PWD/.kcache \
#     OSCARKV_KERNEL_SRC=$s .venv/bin/python -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; done
#   for s in "" $PWD/.alt/int2_paged_bf16.cu; do PATH=/usr/local/cuda/bin:$PATH OSCARKV_KERNEL_CACHE=$PWD/.kcache \
#     .venv/bin/python -c "import sys; sys.path.insert(0, 'bench'); import trace_decode as t; \
#     t.use_trace_build('$s' or None); print(t.cuda_ops.build())"; done   # the trace builds
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s32b.sh
# The patch: split partials in bf16, so that at 128K batch 1 the last CTA holds its 32-33 splits' loads in flight in
# half the registers (KF 18 x uint2 instead of 12 x float4) and merges after one L2 round trip instead of two.
# 1. GPU tests with the patched kernel (test_cuda_kernels.py in full);
# 2. main vs patched, alternating, three rounds: the plan's grid at 128K / 32K batch 1 (variant 4; round 2 also at
#    0.75-2x the plan's INT2 split count), round 1 also 128K batch 32 (variant 11);
# 3. bench/trace_decode.py: the timeline of a 128K / 32K batch-1 call's start and end from inside the kernel (a trace
#    build of main's kernel: b2b, no PDL, in the layer's chain);
# 4. run_gpu_s32a.sh's decode chain with main's kernel (decode-then-GEMV with the decode's PDL off);
# 5. time permitting, main's other ring depths / CTA sizes at batch 1, and the trace of the patched kernel.
set -u
[ -f .alt/int2_paged_bf16.cu ] || { echo ".alt/int2_paged_bf16.cu missing: prepare it as this script's header says"; exit 2; }
T="$(date +%Y-%m-%d)_s32b"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
ALT=$PWD/.alt/int2_paged_bf16.cu
OSCARKV_KERNEL_SRC=$ALT timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py \
  > "$OUT/${T}_tests.log" 2>&1
t "GPU kernel tests (bf16 partials) rc=$?"; tail -1 "$OUT/${T}_tests.log" | cut -c1-200
grep -E "^FAILED|^ERROR" "$OUT/${T}_tests.log" | head -5 | cut -c1-200
ab() {  # $1 tag, $2 source ("" = this tree's), $3 round, $4 INT2 split scales of the batch-1 points, $5 1: also 128K b32
  OSCARKV_KERNEL_SRC=$2 timeout 90 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
    --no-triton --no-append --sweep --sweep-variants 4 --sweep-scales $4 --sweep-points 131072x1,32768x1 \
    --out "/tmp/ab/${T}_ab_$1_$3.json" > "/tmp/ab/${T}_ab_$1_$3.log" 2>&1
  echo "$1 round $3 rc=$?: $(grep -E '^sweep' "/tmp/ab/${T}_ab_$1_$3.log" | sed 's/sweep L=//' | cut -c1-60 | tr '\n' ';')"
  [ "${5:-0}" = 1 ] || return 0
  OSCARKV_KERNEL_SRC=$2 timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
    --no-triton --no-append --sweep --sweep-variants 11 --sweep-scales 1.0 --sweep-points 131072x32 \
    > "/tmp/ab/${T}_ab32_$1_$3.log" 2>&1
  echo "$1 round $3 b32: $(grep -E '^sweep' "/tmp/ab/${T}_ab32_$1_$3.log" | sed 's/sweep L=//' | cut -c1-60)"
}
mkdir -p /tmp/ab
# round 2 also times 0.75-2x the plan's batch-1 INT2 split count (a cheaper merge may move the best count up)
for r in 1 2 3; do
  sc=1.0; [ $r = 2 ] && sc=0.75,1.0,1.5,2.0
  ab main "" $r $sc $([ $r = 1 ] && echo 1); ab bf16 "$ALT" $r $sc $([ $r = 1 ] && echo 1)
done | tee "$OUT/${T}_ab.txt"
t "A/B done"
(cd /tmp/ab && tar czf "$OUT/${T}_ab_logs.tgz" .)
timeout 150 python3 bench/trace_decode.py --points 131072x1,32768x1 --out "$OUT/${T}_trace.json" \
  > "$OUT/${T}_trace.log" 2>&1
t "trace rc=$?"; grep -E "^trace|rror" "$OUT/${T}_trace.log" | cut -c1-600
timeout $(( $(left) - 50 )) python3 bench/decode_chain.py --points 131072x1,32768x1 \
  --out "$OUT/${T}_chain.json" > "$OUT/${T}_chain.log" 2>&1
t "decode chain rc=$?"; grep -E "^chain|rror" "$OUT/${T}_chain.log" | cut -c1-300
# the other ring depths / CTA sizes at batch 1 on this card (main's kernel, each variant's own split plan; the H100
# sweeps of sessions 21-31 took variants 0, 4, 10, 11 only)
[ $(left) -gt 60 ] && timeout $(( $(left) - 5 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" \
  --no-flashinfer --no-triton --no-append --sweep --sweep-variants 4,7,5,6,1,3 --sweep-scales 1.0 \
  --sweep-points 131072x1,32768x1 > /tmp/ab/variants.log 2>&1
t "batch-1 variants rc=$?"; grep -E "^sweep" /tmp/ab/variants.log | sed 's/sweep L=//' | cut -c1-80
[ $(left) -gt 100 ] && timeout $(( $(left) - 5 )) python3 bench/trace_decode.py --src "$ALT" --modes b2b \
  --points 131072x1,32768x1 --out "$OUT/${T}_trace_bf16.json" > /tmp/ab/trace_bf16.log 2>&1
t "trace (bf16 partials) rc=$?"; grep -E "^trace|rror" /tmp/ab/trace_bf16.log | cut -c1-600
