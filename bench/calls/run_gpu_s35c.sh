#!/bin/bash
# Ran in the thirty-fifth session as `BUDGET=400 OSCARKV_COMMIT=bb86ece bash bench/calls/run_gpu_s35c.sh` on an H200 (main's
# rows failed: struct mismatch, see run_gpu_s35d.sh; BENCHMARKS.md, thirty-fifth session).
# Thirty-fifth session, third call. Any card, one GPU, < 10 min, carry [".whl", ".kcache", ".alt/int2_paged_main_6427847.cu"]:
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s35c.sh
# The poll merge (CudaDecodeConfig.poll_merge, this tree) against main's kernel (.alt/int2_paged_main_6427847.cu =
# `git show 6427847:src/oscarkv/kernels/cuda/int2_paged.cu`; prebuilt e231078c..., this tree 3b3bc408..., its trace
# bf5bc0ad...). Why: the end of a batch-1 call is ~4 us after the last warp, ~3 us of it the arrival atomic and the
# last CTA's merge of every split; with the poll merge slot 0's CTA (a BF16-tier one, which ends early at 128K)
# folds the splits as they arrive, so after the last arrival only its flag, its slot's loads and the output remain.
# 1. GPU kernel tests (the poll merge's own included); 2. main / tree (poll off) / tree (poll on) alternating, three
# rounds, 128K / 32K batch 1 (variant 4, the plan's splits), 128K batch 32 (variant 11) for main and tree in round 1
# (the tree's code with poll off must cost nothing); 3. the poll merge's trace.
set -u
T="$(date +%Y-%m-%d)_s35c"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
MAIN=$PWD/.alt/int2_paged_main_6427847.cu
[ -f "$MAIN" ] || { echo "no $MAIN (carry it)"; exit 2; }
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "GPU kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log" | cut -c1-200
grep -E "^FAILED|^ERROR" "$OUT/${T}_tests.log" | head -8 | cut -c1-300
mkdir -p /tmp/ab
for r in 1 2 3; do
  for k in main off poll; do
    [ $(left) -lt 60 ] && break
    src=""; [ $k = main ] && src=$MAIN
    pm=""; [ $k = poll ] && pm="--poll-merge"
    OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" $pm \
      --no-flashinfer --no-triton --no-append --sweep --sweep-variants 4 --sweep-scales 1.0 \
      --sweep-points 131072x1,32768x1 > "/tmp/ab/${T}_${k}_$r.log" 2>&1
    echo "$k round $r: $(grep -E '^sweep' "/tmp/ab/${T}_${k}_$r.log" | sed 's/sweep L=//' | cut -c1-60 | tr '\n' ';')"
    [ $r = 1 ] && [ $k != poll ] && [ $(left) -gt 120 ] && OSCARKV_KERNEL_SRC=$src timeout 60 python3 bench/bench_decode.py \
      --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append --sweep --sweep-variants 11 \
      --sweep-scales 1.0 --sweep-points 131072x32 2>&1 | grep -E "^sweep" | sed "s/^/$k b32: /" | cut -c1-80
  done
done | tee "$OUT/${T}_ab.txt"
t "A/B done"
(cd /tmp/ab && tar czf "$OUT/${T}_ab_logs.tgz" .)
[ $(left) -gt 60 ] && timeout $(( $(left) - 5 )) python3 bench/trace_decode.py --points 131072x1,32768x1 \
  --modes no_pdl,b2b --poll-merge --out "$OUT/${T}_trace.json" > "$OUT/${T}_trace.log" 2>&1
t "trace (poll merge) rc=$?"; grep -E "^trace|SM loop|rror" "$OUT/${T}_trace.log" | cut -c1-600
