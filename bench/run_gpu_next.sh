#!/bin/bash
# Prepared in the fifteenth session, not yet run (its device time was spent). One H200, < 9 min, carry [".whl",
# ".kcache"] (rebuild .kcache from the committed source first):   bash bench/run_gpu_next.sh
# (1) the CUDA kernel tests (new: the CUDA append reads strided k/v views, as the paged step now passes them) and
# the paged-cache GPU tests; (2) issue 8 on the final tree (per-sequence split tables on by default, the CTA order
# rule, no per-layer k/v copies): Qwen3-8B compiled step at 128K batch 1 and at equal KV memory (40 GiB, 32K),
# OSCAR and BF16 in one run (equal memory last measured in the twelfth session: 4.76x).
set -u
T="$(date +%Y-%m-%d)_next"
source bench/gpu_env.sh
timeout 220 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py tests/cache/test_gpu_paged.py \
  tests/cache/test_compiled_step.py > "$OUT/${T}_tests.log" 2>&1
t "GPU tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -5 | cut -c1-300
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_next
timeout $(( 560 - $(date +%s) + T0 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
  --tput-context 32768 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-8b.json" \
  > "$OUT/${T}_bench_model_qwen3-8b.log" 2>&1
t "bench_model rc=$?"; grep -E "oscar_compiled|bf16_compiled|Error|error" "$OUT/${T}_bench_model_qwen3-8b.log" | cut -c1-300
# (3) issue 8's 128K check against references that reproduce the kernel's int8 query (new: "reference_q8",
# "reference_exact_q8"; sixth session: paged vs bf16 reference 8.3%, vs exact 7.9%, the references between
# themselves 5.3%) -- a separate call (~4 min on the 8B at 128K):
#   python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
#     --generate-128k 131072 --generate-refs reference_q8,reference_exact_q8,reference_exact --steps 5 --out $OUT/gen.json
