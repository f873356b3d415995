#!/bin/bash
# Seventeenth session, call a (one H200, < 10 min, carry [".whl", ".kcache"] with both libraries built):
#   bash bench/calls/run_gpu_s17a.sh
# Issue 8's 128K accuracy gap. Call 1 of this session (fused-rotation branch, diag_model_decode): every write_kv of
# a 128K generate equals the torch append; every decode call is within 0.3-0.5% of the float64 reference except
# layer 0 (3%), whose output is small next to the values. Here: the kernel's precision on that case
# (bench/diag_decode_precision.py), with the zero-point sum folded into acc every 32 tiles (this tree) and with the
# committed kernel (bench/alt_int2_paged_committed.cu); then the CUDA kernel tests on this tree's kernel, then the
# 128K generate against the references (is the 13-16% gap gone?).
set -u
T="$(date +%Y-%m-%d)_s17a"
source bench/gpu_env.sh
timeout 200 python3 bench/diag_decode_precision.py --contexts 8192,131072 --score-std 1,3 --splits 1,8,64 --same-v \
  --alt-src bench/alt_int2_paged_committed.cu --out "$OUT/${T}_precision.json" > "$OUT/${T}_precision.log" 2>&1
t "precision rc=$?"; grep -v -i warn "$OUT/${T}_precision.log" | cut -c1-200 | tail -80
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py -x -k "not 128k" \
  > "$OUT/${T}_kernel_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^E .*rel err|FAILED|passed|failed|rror" "$OUT/${T}_kernel_tests.log" | tail -8 | cut -c1-400
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s17
timeout $(( 585 - $(date +%s) + T0 )) python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --generate-refs reference_exact,paged_triton --steps 5 \
  --out "$OUT/${T}_generate_128k.json" > "$OUT/${T}_generate_128k.log" 2>&1
t "generate 128K rc=$?"; python3 -c "
import json; d=json.load(open('$OUT/${T}_generate_128k.json'))['generate_long']
print({k: round(v, 4) for k, v in d['max_rel_logit_diff'].items()})
print({k: [round(x, 3) for x in v] for k, v in d['per_step'].items()})"
