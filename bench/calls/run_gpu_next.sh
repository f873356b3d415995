#!/bin/bash
# Prepared in the seventeenth session, not yet run (its device time was spent). One H200, < 10 min, carry [".whl",
# ".kcache"] (rebuild .kcache from the committed source first):   bash bench/calls/run_gpu_next.sh
# After the kernel's 8-tile folds (8a3eabf) and the int8-query reference's fix (b36056d): every GPU test (the d 64
# G 1 case should pass now; the new flat-softmax 128K test), the decode table against every peer (issue 7's
# targets; the fold's cost at batch 1), and the Qwen3-8B 128K batch-1 step (sixteenth session 1.46x of BF16).
set -u
T="$(date +%Y-%m-%d)_next"
source bench/gpu_env.sh
timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py \
  tests/cache/test_compiled_step.py > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror|flat softmax" "$OUT/${T}_tests.log" | tail -8 | cut -c1-300
timeout 250 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --append-batches 1,256 \
  --out "$OUT/${T}_table.json" > "$OUT/${T}_table.log" 2>&1
t "table rc=$?"; grep -E "^L=|copy bandwidth|accuracy|Error|append" "$OUT/${T}_table.log" | cut -c1-330
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_next
timeout $(( 585 - $(date +%s) + T0 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
  --tput-context 32768 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-8b.json" \
  > "$OUT/${T}_bench_model_qwen3-8b.log" 2>&1
t "bench_model rc=$?"; grep -E "oscar_compiled|bf16_compiled|equal|Error|error" "$OUT/${T}_bench_model_qwen3-8b.log" | cut -c1-300
