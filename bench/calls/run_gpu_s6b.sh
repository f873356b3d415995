#!/bin/bash
# Sixth session, device call B (issues 7 / 8), < 10 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s6b.sh
# 1. GPU kernel tests (tile16 pools as records and as separate tensors; a 131,072-token sequence against the
#    float64 reference) and the paged transformers path.
# 2. Read floor (a bare one-launch read of the same bytes) and records vs separate tensors (sweep + loads only).
# 3. Qwen3-8B 128K: paged generate vs the bf16 reference and the exact fp32 reference.
set -u
T="$(date +%Y-%m-%d)_s6b"
source bench/gpu_env.sh
timeout 150 python3 -m pytest -q -x -s -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|Error|128K rel" "$OUT/${T}_tests.log" | tail -6
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/adversarial/test_nan_propagates.py \
  >> "$OUT/${T}_tests.log" 2>&1
t "cache GPU tests rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/${T}_tests.log" | tail -3
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 131072 --batches 1 --read-floor 4096x1,32768x1,131072x1,131072x32 \
  --sweep --sweep-points 131072x1,32768x1,4096x1 --sweep-variants 4 --sweep-scales 1.0 --sweep-records 0,1 \
  --probe --probe-points 131072x1 --probe-variants 4 \
  --out "$OUT/${T}_records.json" > "$OUT/${T}_records.log" 2>&1
t "records rc=$?"; grep -E "^read floor|^probe|^sweep|^L=|Error" "$OUT/${T}_records.log" | cut -c1-300
timeout 80 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts 131072 --batches 32 --sweep --sweep-points 131072x32 --sweep-variants 0 --sweep-scales 1.0 \
  --sweep-records 0,1 --out "$OUT/${T}_records_b32.json" > "$OUT/${T}_records_b32.log" 2>&1
t "records b32 rc=$?"; grep -E "^sweep|^L=|Error" "$OUT/${T}_records_b32.log" | cut -c1-300
timeout 190 python3 bench/bench_model.py --models qwen3-8b --contexts "" --modes compiled --tput-context 0 \
  --generate-128k 131072 --generate-refs reference,reference_exact --steps 5 --out "$OUT/${T}_generate.json" \
  > "$OUT/${T}_generate.log" 2>&1
t "generate rc=$?"; grep -E "max_rel|Error" "$OUT/${T}_generate.log" | cut -c1-300
python3 - "$OUT/${T}_generate.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1])).get("generate_long", {})
print("max_rel_logit_diff", json.dumps(g.get("max_rel_logit_diff")))
for k, v in g.get("per_step", {}).items():
    print(k, [round(x, 4) for x in v])
for r in ("paged", "reference", "reference_exact"):
    print(r, g.get(r, {}).get("greedy"), g.get(r, {}).get("error", ""))
PY
