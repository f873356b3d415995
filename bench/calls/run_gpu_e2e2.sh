#!/bin/bash
# Issue 8, helper e2e2: profile + compiled decode step on the GPU (one device call).
# From /work/main with carry [".wt/e2e2", ".whl"]:  cd .wt/e2e2 && bash bench/calls/run_gpu_e2e2.sh PHASE
#   PHASE=1: profile qwen3-4b 8K (oscar/bf16 x graph/compiled) + bench qwen3-4b at 8K / 128K
#   PHASE=2: GPU test of the compiled step (tiny Qwen3) + batch-1 GEMM shapes (bench/gemv_shapes.py)
#   PHASE=3: bench_model compiled (BENCH_ARGS, default "--modes compiled"; e.g. add "--models qwen3-4b" or
#            "--fuse-projections"). Estimate with cold compiles: ~4 min per model (one OSCAR compilation per
#            batch, BF16: static, then one symbolic-length recompilation, then one per batch).
set -u
PHASE=${1:-1}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WHL=$(ls ../../.whl/transformers-5.24.0-py3-none-any.whl .whl/transformers-5.24.0-py3-none-any.whl 2>/dev/null | head -1)
[ -n "$WHL" ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site524 "$WHL" > "$OUT/pip.log" 2>&1
export HF_HUB_OFFLINE=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_e2e2
if [ -n "$WHL" ] && PYTHONPATH=/tmp/site524 python3 -c "import transformers.cache_utils, transformers.models.qwen3" 2> "$OUT/import524.log"; then
  export PYTHONPATH=/tmp/site524:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
python3 -c "import transformers, torch, triton; print('versions', transformers.__version__, torch.__version__, triton.__version__)"
nproc; date
if [ "$PHASE" = 1 ]; then
  T0=$(date +%s)
  timeout 200 python3 bench/profile_step.py --model qwen3-4b --context 8192 --out "$OUT/profile.json" > "$OUT/profile.log" 2>&1
  echo "profile rc=$? $(( $(date +%s) - T0 ))s"; grep -v -i "warn\|USDT\|sdpa(" "$OUT/profile.log" | head -80
  T0=$(date +%s)
  timeout 100 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled --tput-context 0 \
    --steps 20 --out "$OUT/bench_model.json" > "$OUT/bench_model.log" 2>&1
  echo "bench rc=$? $(( $(date +%s) - T0 ))s"; grep -v -i "warn\|sdpa(" "$OUT/bench_model.log" | cut -c1-330 | tail -20
elif [ "$PHASE" = 2 ]; then
  T0=$(date +%s)
  OSCAR_GPU_TEST_LOG=$OUT/gpu_tests.jsonl timeout 50 python3 -m pytest -q -s -p no:cacheprovider \
    tests/cache/test_compiled_step.py -k gpu > "$OUT/gpu_tests.log" 2>&1
  echo "tests rc=$? $(( $(date +%s) - T0 ))s"; grep -E "passed|failed|Error|rel_logit" "$OUT/gpu_tests.log" | tail -6
  timeout 25 python3 bench/gemv_shapes.py --out "$OUT/gemv.json" > "$OUT/gemv.log" 2>&1; echo "gemv rc=$?"
  cut -c1-400 "$OUT/gemv.log"
else
  T0=$(date +%s)
  timeout ${BENCH_TIMEOUT:-590} python3 bench/bench_model.py --steps 20 ${BENCH_ARGS:---modes compiled} --out "$OUT/bench_model.json" > "$OUT/bench_model.log" 2>&1
  echo "bench rc=$? $(( $(date +%s) - T0 ))s"; grep -v -i "warn\|sdpa(" "$OUT/bench_model.log" | cut -c1-330 | tail -40
fi
