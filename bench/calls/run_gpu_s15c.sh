#!/bin/bash
# Fifteenth session, device call c (< 10 min on one H200), carry [".whl", ".kcache"]:   bash bench/calls/run_gpu_s15c.sh
# The tree as committed: per-sequence split tables on by default (CudaDecodeConfig.adaptive_splits=True) and the
# CTA order rule (split-major up to 3 waves; call b). (1) the CUDA kernel tests and the paged-cache GPU tests;
# (2) the whole decode table with every peer (FlashInfer BF16 / FP8, cuDNN, flash SDPA) in one run;
# (3) issue 8 at 128K batch 1, Qwen3-8B compiled step (as call s13i) if time is left.
set -u
T="$(date +%Y-%m-%d)_s15c"
source bench/gpu_env.sh
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py \
  tests/cache/test_compiled_step.py > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -5 | cut -c1-300
timeout 280 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --append-batches 1,256 \
  --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|accuracy|Error|append" "$OUT/${T}_table.log" | cut -c1-330
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s15c
timeout $(( 560 - $(date +%s) + T0 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
  --tput-context 0 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-8b.json" \
  > "$OUT/${T}_bench_model_qwen3-8b.log" 2>&1
t "bench_model rc=$?"; grep -E "oscar_compiled|bf16_compiled|Error|error" "$OUT/${T}_bench_model_qwen3-8b.log" | cut -c1-300
