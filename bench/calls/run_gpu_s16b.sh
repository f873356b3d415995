#!/bin/bash
# Sixteenth session, call b. One H200, < 10 min, carry [".whl", ".kcache"]:   bash bench/calls/run_gpu_s16b.sh
# (1) the compiled-step GPU tests (new: q and k rotated by one GEMM per KV head, rotation.rotate_with_keys);
# (2) issue 8 attribution by replay time (bench/step_ablate.py: OSCAR with the append / the decode kernel switched
# off, BF16 with its attention switched off, one process); (3) bench_model: Qwen3-8B 128K batch 1 and equal KV
# memory (40 GiB, 32K), OSCAR and BF16 in one run.
set -u
T="$(date +%Y-%m-%d)_s16b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s16
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/cache/test_compiled_step.py > "$OUT/${T}_tests.log" 2>&1
t "compiled-step tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -5 | cut -c1-300
timeout 300 python3 bench/step_ablate.py --model qwen3-8b --context 131072 --out "$OUT/${T}_ablate_8b.json" \
  > "$OUT/${T}_ablate_8b.log" 2>&1
t "ablate rc=$?"; grep -E "^oscar|^bf16|^OSCAR|rror" "$OUT/${T}_ablate_8b.log" | cut -c1-300
timeout $(( 585 - $(date +%s) + T0 )) python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled \
  --tput-context 32768 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-8b.json" \
  > "$OUT/${T}_bench_model_qwen3-8b.log" 2>&1
t "bench_model rc=$?"; grep -E "oscar_compiled|bf16_compiled|tput|rows|Error|error" "$OUT/${T}_bench_model_qwen3-8b.log" | cut -c1-300
