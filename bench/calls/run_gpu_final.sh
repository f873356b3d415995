#!/bin/bash
# The session's closing GPU call on the merged tree (one device call, < 10 min): kernel + vLLM-shape +
# adversarial GPU tests, the validation before/after bench, then the issue-8 tests and model benchmark.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/smi.txt" 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels > "$OUT/final_kernels.log" 2>&1; echo "kernels rc=$?"; tail -2 "$OUT/final_kernels.log"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/vllm/test_gpu_vllm_shapes.py tests/adversarial/test_nan_propagates.py tests/adversarial/test_paged_tables.py > "$OUT/final_vllm_adv.log" 2>&1; echo "vllm+adv rc=$?"; tail -2 "$OUT/final_vllm_adv.log"
timeout 60 python3 bench/bench_validate.py --device cuda --reps 50 --batch 32 --context 8192 > "$OUT/bench_validate_gpu.jsonl" 2> "$OUT/bench_validate_gpu.err"; echo "validate rc=$?"; tail -5 "$OUT/bench_validate_gpu.jsonl"
sed -i 's/timeout 300 python3 bench\/bench_model.py/timeout 200 python3 bench\/bench_model.py/' bench/calls/run_gpu_issue8.sh
bash bench/calls/run_gpu_issue8.sh
