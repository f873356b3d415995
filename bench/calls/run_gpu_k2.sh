#!/bin/bash
# One device call for issue 7's kernel rewrite (branch k2), < 10 min on one H200. From the repo root of the
# session's checkout with carry [".wt/k2", ".whl"]:  cd .wt/k2 && bash bench/calls/run_gpu_k2.sh
# Writes at most 4 files to $OUT: tests log, bench log + JSON (d128), head_dim-64 bench log + JSON in one tar.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
WHL=$(ls ../../.whl/flashinfer_python-*.whl ../../.whl/apache_tvm_ffi-*.whl 2>/dev/null | tr '\n' ' ')
if [ -n "$WHL" ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site $WHL > "$OUT/pip.log" 2>&1; fi
export PYTHONPATH=$PWD/src:/tmp/site
T="2026-12-03b_k2"  # file prefix, as committed under bench/results/
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/${T}_gpu.txt" 2>&1
git log -1 --format="%h %s" >> "$OUT/${T}_gpu.txt" 2>/dev/null || echo "commit: see the carried worktree (git metadata does not travel)" >> "$OUT/${T}_gpu.txt"
# 1. correctness (builds the library first: ~1 min)
# kernels first (-x: a broken kernel stops here), then the GPU tests of issues 11 and 8 that wait on a GPU run
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/kernels > "$OUT/${T}_tests.log" 2>&1
echo "kernel tests rc=$?"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/adversarial tests/cache/test_gpu_paged.py \
  tests/cache/test_compiled_step.py tests/vllm/test_gpu_vllm_shapes.py >> "$OUT/${T}_tests.log" 2>&1
echo "tests rc=$?"; tail -3 "$OUT/${T}_tests.log"
# 2. sweep + table at the points with FlashInfer BF16/FP8 + probe + append (PDL off/on)
timeout 330 python3 bench/bench_decode.py --sweep --probe --contexts 4096,32768,131072 --batches 1,8,32 \
  --append-batches 1,8,256 --out "$OUT/${T}_bench_d128.json" > "$OUT/${T}_bench_d128.log" 2>&1
echo "bench rc=$?"; grep -E "^L=|append|launch floor|accuracy|probe" "$OUT/${T}_bench_d128.log" | tail -40
# 3. head_dim 64, ours + SDPA only
timeout 90 python3 bench/bench_decode.py --head-dim 64 --no-flashinfer --no-triton --no-append \
  --contexts 32768,131072 --batches 1,32 --out "$OUT/${T}_bench_d64.json" > "$OUT/${T}_bench_d64.log" 2>&1
echo "d64 rc=$?"; grep -E "^L=" "$OUT/${T}_bench_d64.log"
cd "$OUT" && tar czf "${T}_all.tgz" ${T}_* pip.log 2>/dev/null; ls "$OUT"
