#!/bin/bash
# Fifteenth session, device call b (< 6 min on one H200), carry [".whl", ".kcache"]:   bash bench/calls/run_gpu_s15b.sh
# Issue 7: the CTA dispatch order (CudaDecodeConfig.cta_order). Call a's capacity plans ran a sequence's own split
# counts faster split-major than its own plan sequence-major (32K batch 8: 59.8 vs 70.2 us; 3 + 5 splits either
# way): with the BF16-tier CTAs interleaved, sequence-major placement stacks INT2 CTAs on some SMs. (1) the CUDA
# kernel tests (merge test over both orders); (2) our kernel alone over the table, sequence-major then split-major,
# twice, interleaved; (3) the INT2 split count under split-major at multi-CTA-per-SM points (x0.75 .. x2).
set -u
T="$(date +%Y-%m-%d)_s15b"
source bench/gpu_env.sh
timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_cuda_kernels.py > "$OUT/${T}_tests.log" 2>&1
t "kernel tests rc=$?"; grep -E "^FAILED|passed|failed|rror" "$OUT/${T}_tests.log" | tail -4 | cut -c1-300
for r in 1 2; do
  for o in sequence split; do
    timeout 100 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
      --cta-order $o --out "$OUT/${T}_order_${o}_$r.json" > "$OUT/${T}_order_${o}_$r.log" 2>&1
    t "order $o run $r rc=$?"
  done
done
timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-flashinfer --no-triton --no-append \
  --contexts "" --cta-order split --sweep --sweep-variants 0 --sweep-scales 0.75,1.0,1.5,2.0 \
  --sweep-points 16384x8,32768x8,131072x8,32768x32,131072x32,32768x128 \
  --out "$OUT/${T}_sweep_split.json" > "$OUT/${T}_sweep_split.log" 2>&1
t "sweep rc=$?"; grep -E "^sweep" "$OUT/${T}_sweep_split.log"
python3 - "$OUT" "$T" <<'PY'
import json, sys
out, T = sys.argv[1], sys.argv[2]
rows = {}
for o in ("sequence", "split"):
    for r in (1, 2):
        try:
            d = json.load(open(f"{out}/{T}_order_{o}_{r}.json"))
        except Exception as e:
            print("missing", o, r, e); continue
        for p in d.get("decode", []):
            if "ours_us" in p:
                rows.setdefault((p["L"], p["B"]), {}).setdefault(o, []).append(round(p["ours_us"], 1))
for (L, B), v in sorted(rows.items()):
    print(f"L={L:6d} B={B:3d} sequence {v.get('sequence')} split {v.get('split')}")
PY
