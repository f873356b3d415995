#!/bin/bash
# Issue 8 on the GPU machine, one device call (about 4-5 minutes): GPU tests of the paged cache + bench_model.
# From /work/main with carry [".wt/gpucache" (or the merged tree), ".whl"]:
#   cd .wt/gpucache && bash bench/calls/run_gpu_issue8.sh
# Logs go to $OUT. transformers 5.24.0 (our pin) comes from ../../.whl when it imports there, else the device's own.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WHL=$(ls ../../.whl/transformers-5.24.0-py3-none-any.whl .whl/transformers-5.24.0-py3-none-any.whl 2>/dev/null | head -1)
[ -n "$WHL" ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site524 "$WHL" > "$OUT/pip.log" 2>&1
export HF_HUB_OFFLINE=1
if [ -n "$WHL" ] && PYTHONPATH=/tmp/site524 python3 -c "import transformers.cache_utils, transformers.models.qwen3" 2> "$OUT/import524.log"; then
  export PYTHONPATH=/tmp/site524:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
python3 -c "import transformers, torch, triton; print('versions', transformers.__version__, torch.__version__, triton.__version__)"
git log --oneline -1 > "$OUT/commit.txt" 2>/dev/null
OSCAR_GPU_TEST_LOG=$OUT/gpu_tests.jsonl timeout 150 python3 -m pytest -q -s -p no:cacheprovider \
  tests/cache/test_gpu_paged.py tests/cache/test_paged_backend.py > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$?"; grep -E "passed|failed" "$OUT/gpu_tests.log" | tail -3; cat "$OUT/gpu_tests.jsonl" 2>/dev/null
timeout 300 python3 bench/bench_model.py --steps 20 --generate-128k 131072 --out "$OUT/bench_model.json" > "$OUT/bench_model.log" 2>&1
echo "bench rc=$?"; grep -v Warning "$OUT/bench_model.log" | grep -v "Assertion" | tail -30
