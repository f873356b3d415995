#!/bin/bash
# Third session's device calls (issues 7, 8, 11), each < 10 min on one H200. From the repo root, carry [".whl"]:
#   bash bench/calls/run_gpu_s3.sh A   GPU tests that wait on a GPU run (NaN merge / Triton head_dim guard, paged
#                                cache vs reference, compiled step) + bench_validate (checks on/off) +
#                                batch-1 GEMV shapes + bench_model qwen3-4b compiled (128K batch 1, equal memory)
#   bash bench/calls/run_gpu_s3.sh B   diag_gpu_paged (paged vs reference per kernel backend) + bench_model qwen3-8b
#                                compiled at 128K batch 1 + the BF16 half of qwen3-4b's equal-memory run
#   bash bench/calls/run_gpu_s3.sh C   NaN tests + paged-vs-reference GPU tests (after the fixes of A/B) + qwen3-4b
#                                128K batch 1 with fused projections
set -u
PHASE=${1:-A}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T="2026-12-03c_s3${PHASE}"
WHL=$(ls .whl/flashinfer_python-*.whl .whl/apache_tvm_ffi-*.whl .whl/transformers-5.24.0-py3-none-any.whl 2>/dev/null | tr '\n' ' ')
[ -n "$WHL" ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site $WHL > "$OUT/pip.log" 2>&1
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s3
export PYTHONPATH=/tmp/site:$PWD/src
python3 -c "import transformers, torch, triton; print('versions', transformers.__version__, torch.__version__, triton.__version__)" | tee "$OUT/${T}_gpu.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv >> "$OUT/${T}_gpu.txt" 2>&1
t() { echo "[$(date +%T) +$(( $(date +%s) - T0 ))s] $*"; }
T0=$(date +%s)
if [ "$PHASE" = A ]; then
  OSCAR_GPU_TEST_LOG=$OUT/${T}_gpu_tests.jsonl timeout 200 python3 -m pytest -q -p no:cacheprovider \
    tests/adversarial/test_nan_propagates.py \
    tests/cache/test_gpu_paged.py tests/cache/test_compiled_step.py > "$OUT/${T}_tests.log" 2>&1
  t "tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -12
  timeout 70 python3 bench/bench_validate.py --device cuda --context 8192 --batch 32 --reps 30 > "$OUT/${T}_validate.jsonl" 2>&1
  t "validate rc=$?"; cut -c1-300 "$OUT/${T}_validate.jsonl"
  timeout 30 python3 bench/gemv_shapes.py --out "$OUT/${T}_gemv.json" > "$OUT/${T}_gemv.log" 2>&1
  t "gemv rc=$?"; cut -c1-300 "$OUT/${T}_gemv.log" | tail -14
  timeout 230 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled --tput-context 32768 \
    --steps 20 --out "$OUT/${T}_bench_model.json" > "$OUT/${T}_bench_model.log" 2>&1
  t "bench_model rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model.log" | cut -c1-420 | tail -12
elif [ "$PHASE" = C ]; then
  OSCAR_GPU_TEST_LOG=$OUT/${T}_gpu_tests.jsonl timeout 150 python3 -m pytest -q -p no:cacheprovider \
    tests/adversarial/test_nan_propagates.py tests/cache/test_gpu_paged.py > "$OUT/${T}_tests.log" 2>&1
  t "tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -12; cut -c1-200 "$OUT/${T}_gpu_tests.jsonl"
  timeout 170 python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled --tput-context 0 \
    --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_fused.json" > "$OUT/${T}_bench_model_fused.log" 2>&1
  t "bench_model 4b fused rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_fused.log" | cut -c1-420 | tail -8
else
  timeout 130 python3 bench/diag_gpu_paged.py --kinds qwen3,qwen2 > "$OUT/${T}_diag.jsonl" 2> "$OUT/${T}_diag.err"
  t "diag rc=$?"; cut -c1-330 "$OUT/${T}_diag.jsonl"; tail -3 "$OUT/${T}_diag.err"
  timeout 210 python3 bench/bench_model.py --models qwen3-8b --contexts 131072 --modes compiled --tput-context 0 \
    --steps 20 --out "$OUT/${T}_bench_model_8b.json" > "$OUT/${T}_bench_model_8b.log" 2>&1
  t "bench_model 8b rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_8b.log" | cut -c1-420 | tail -6
  timeout 150 python3 bench/bench_model.py --models qwen3-4b --contexts "" --modes compiled --tput-context 32768 \
    --tput-methods bf16_compiled --steps 20 --out "$OUT/${T}_bench_model_4b_tput_bf16.json" > "$OUT/${T}_bench_model_4b_tput_bf16.log" 2>&1
  t "bench_model 4b bf16 equal-memory rc=$?"; grep -v -i "warn\|sdpa(" "$OUT/${T}_bench_model_4b_tput_bf16.log" | cut -c1-420 | tail -6
fi
