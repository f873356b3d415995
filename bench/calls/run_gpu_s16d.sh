#!/bin/bash
# Sixteenth session, call d. One H200, < 8 min, carry [".whl", ".kcache"]:   bash bench/calls/run_gpu_s16d.sh
# (1) issue 8's 128K check, split by kernel: call c measured paged (CUDA kernel) vs the references at 14.7-16.5%
# max relative logit difference (the sixth session's kernel: 7.9%), the q8 reference no closer than the exact one;
# here the same paged cache teacher-forced on its Triton and torch kernels (exact query) beside the CUDA run;
# (2) bench_model on Qwen3-4B: 128K batch 1 and equal KV memory (40 GiB, 32K), OSCAR and BF16 in one run.
set -u
T="$(date +%Y-%m-%d)_s16d"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s16
timeout 240 python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --generate-refs paged_torch,paged_triton,reference_exact,reference_q8 --steps 5 \
  --out "$OUT/${T}_generate_128k.json" > "$OUT/${T}_generate_128k.log" 2>&1
t "generate 128K rc=$?"; python3 -c "
import json; d=json.load(open('$OUT/${T}_generate_128k.json'))['generate_long']
print({k: round(v, 4) for k, v in d['max_rel_logit_diff'].items()})
print({k: (v.get('error') or round(v['seconds'], 1)) for k, v in d.items() if isinstance(v, dict) and ('seconds' in v)})"
timeout $(( 460 - $(date +%s) + T0 )) python3 bench/bench_model.py --models qwen3-4b --contexts 131072 --modes compiled \
  --tput-context 32768 --fuse-projections --steps 20 --out "$OUT/${T}_bench_model_qwen3-4b.json" \
  > "$OUT/${T}_bench_model_qwen3-4b.log" 2>&1
t "bench_model 4b rc=$?"; grep -E "oscar_compiled|bf16_compiled|Error|error" "$OUT/${T}_bench_model_qwen3-4b.log" | cut -c1-300
