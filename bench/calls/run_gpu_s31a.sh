#!/bin/bash
# Thirtieth session, for the next device call (main 545570f or later). One GPU, < 10 min, carry [".whl", ".kcache"]
# (.kcache: this tree's kernel library, cuda_ops.build()). Run as
#   OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s31a.sh
# 1. the CUDA kernel tests in full on the tree with the lean append rotation merged and the per-card default
#    variant (the thirtieth session ran only the append / rotation / graph / paged subset and the cache suites);
# 2. where the decode call's in-model time goes: the Qwen3-8B step at 128K batch 1 spends 42.8 us per layer in the
#    decode (step_ablate, H100) where bench_decode times 36.5 us back to back: bench/decode_chain.py times it after
#    an o_proj GEMV and in append -> decode -> GEMV, and alone with PDL off (128K / 32K batch 1, 32K batch 59);
# 3. the read bound of issue 7's batch-1 targets on this card (bare read of the INT2 bytes; the pool's records as
#    the kernel reads them): measured so far on the H200 only (20.3 us at 128K batch 1 there).
set -u
T="$(date +%Y-%m-%d)_s31a"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 260 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "CUDA kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log" | cut -c1-200; grep -E "^FAILED|^ERROR" "$OUT/${T}_tests.log" | head -5 | cut -c1-200
timeout 150 python3 bench/decode_chain.py --points 131072x1,32768x1,32768x59 --out "$OUT/${T}_chain.json" \
  > "$OUT/${T}_chain.log" 2>&1
t "decode chain rc=$?"; grep -E "^chain|rror" "$OUT/${T}_chain.log" | cut -c1-260
timeout $(( $(left) - 5 )) python3 bench/bench_decode.py --pdl 1 --contexts "" --no-flashinfer --no-triton --no-append \
  --read-floor 131072x1,32768x1 --read-records 131072x1,32768x1 --out "$OUT/${T}_floor.json" > "$OUT/${T}_floor.log" 2>&1
t "read floor rc=$?"; grep -E "^read|copy bandwidth|rror" "$OUT/${T}_floor.log" | cut -c1-300
