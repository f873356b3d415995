#!/bin/bash
# Forty-eighth session, second call (one GPU, < 7 min, carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s48b.sh
# log8 records with the V scales from the CTA's table (ours_log8) and from the fp16 ex2 unit (ours_log8x,
# CudaDecodeConfig.log8_ex2) beside fp16 records (ours), issue 7's headline rows with every peer, then 128K batch 32
# once more; the log8 GPU tests first. (Ran at 31fc8bb; CudaDecodeConfig.log8_ex2 and the ours_log8x column were removed
# after this run: no gain at 128K batch 32, 801.9 vs 802.2 us; BENCHMARKS.md, forty-eighth session.)
set -u
T="$(date +%Y-%m-%d)_s48b"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py -k log8 \
  > "$OUT/${T}_tests_log8.log" 2>&1
t "log8 tests rc=$?"; tail -1 "$OUT/${T}_tests_log8.log"; grep -E "^FAILED|Error|assert" "$OUT/${T}_tests_log8.log" | head -8
for r in key:131072,32768:32,1 again:131072:32; do
  IFS=: read tag ctx bs <<< "$r"
  [ $(left) -gt 60 ] || break
  timeout $(( $(left) - 10 )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append \
    --contexts $ctx --batches $bs --also-log8 --out "$OUT/${T}_$tag.json" > "$OUT/${T}_$tag.log" 2>&1
  t "$tag rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_$tag.log" | cut -c1-520
done
t done
