#!/bin/bash
# Twenty-ninth session, last call (~8 device minutes), main with the staged append rotation (cc552a7). One GPU, carry
# [".whl", ".kcache"]. Run as  BUDGET=<s> OSCARKV_COMMIT=<short HEAD> bash bench/calls/run_gpu_s29d.sh
# Why: on the H100 the Qwen3-4B equal-memory step (32K, batch 59) gives 5.999x / 6.000x BF16 (run_gpu_s29a/b), and
# the INT2 split count at 32K batch 59 went the other way from the H200's: x0.6 474, x0.75 460, x1.0 (the plan's 4)
# 453.7 us, three rounds. 1. do more splits (x1.25..x3) or another variant (0, 11) beat the plan there, two rounds
# (and 128K batch 32)? 2. if one is >= 1% faster in both rounds, the 4B's (then the 8B's) equal-memory step with it
# against the plan's, alternating.
set -u
T="$(date +%Y-%m-%d)_s29d"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s29
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
for r in 1 2; do
  timeout 90 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer --no-triton --no-append \
    --sweep --sweep-variants 10,0,11 --sweep-scales 1.0,1.25,1.5,2.0,3.0 --sweep-points 32768x59 \
    --out "$OUT/${T}_sweep$r.json" > "$OUT/${T}_sweep$r.log" 2>&1
  t "sweep $r rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_sweep$r.log" | cut -c1-100
done
BEST=$(cat "$OUT/${T}_sweep1.log" "$OUT/${T}_sweep2.log" | python3 -c '
import re, sys, collections
t = collections.defaultdict(list)
for line in sys.stdin:
    m = re.match(r"sweep L=32768 B=59 variant (\d+) splits x([\d.]+) .*: ([\d.]+) us", line)
    if m: t[(m[1], m[2])].append(float(m[3]))
base = t.get(("10", "1.0"))
ok = {k: v for k, v in t.items() if len(v) == 2 and base and len(base) == 2 and all(x < 0.99 * b for x, b in zip(v, base))}
print(" ".join(min(ok, key=lambda k: sum(ok[k]))) if ok else "")')
t "best other than the plan, >= 1% faster in both rounds: '${BEST}'"
[ -z "$BEST" ] && exit 0
set -- $BEST
EQ=(--contexts "" --modes compiled --tput-context 32768 --fuse-projections --steps 32 --compiled-bf16-backends CUDNN_ATTENTION)
for m in qwen3-4b qwen3-8b; do
  for which in plan best; do
    [ $(left) -lt 70 ] && break 2
    extra=(); [ $which = best ] && extra=(--decode-variant $1 --decode-int2-split-scale $2)
    timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models $m "${EQ[@]}" "${extra[@]}" \
      --out "$OUT/${T}_eq_${m}_$which.json" > "$OUT/${T}_eq_${m}_$which.log" 2>&1
    t "equal memory $m $which rc=$?"; grep -E "equal|Error|error" "$OUT/${T}_eq_${m}_$which.log" | cut -c1-240
  done
done
