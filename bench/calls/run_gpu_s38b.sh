#!/bin/bash
# Thirty-eighth session, call b. Any card, one GPU, < 10 min, carry [".whl", ".kcache"] (.kcache: the library and its
# trace build of this tree, prebuilt on the CPU machine):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s38b.sh
# (Ran at 13ab3fc; split_skew was measured slower and removed afterwards: bench/results/2026-12-06_s38_split_skew.patch.)
# Unequal INT2 split ranges (CudaDecodeConfig.split_skew; the traces end the second dispatch round's splits 2-4.5 us
# after the first's at 128K batch 1):
# 1. the kernel GPU tests (new: test_cuda_decode_split_skew);
# 2. skews "wave" / "linear" against equal ranges at 128K / 96K / 64K batch 1 (variant 7 / 4 as the plan picks) and
#    128K b2, 32K b1, two rounds;
# 3. the trace of 128K batch 1 with the best 128K skew (does the tail close?);
# 4. issue 7's 128K and 32K batch-1 rows with every peer, equal ranges and the best skew in the same call.
set -u
T="$(date +%Y-%m-%d)_s38b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s38b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
kernel_tests 170
variant_sweep 131072x1,98304x1,131072x1,98304x1 7,7:w0.03,7:w0.06,7:w0.1,7:w0.15,7:l0.05,7:l0.1 skew_long 200
variant_sweep 65536x1,32768x1,131072x2,65536x1,32768x1,131072x2 4,4:w0.05,4:w0.1,4:l0.05,4:l0.1 skew_short 160
# the best 128K b1 skew by its mean of two rounds (empty: equal ranges)
BEST=$(python3 - "$OUT/${T}_skew_long.log" <<'PY'
import re, sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"sweep L=131072 B=1 variant (\S+) .*: ([\d.]+) us", line)
    if m:
        t[m.group(1)].append(float(m.group(2)))
best = min(t, key=lambda k: sum(t[k]) / len(t[k])) if t else "7"
print(best.partition(":")[2])
PY
)
t "best 128K b1 skew: '${BEST}'"
if [ -n "$BEST" ]; then
  timeout 100 python3 bench/trace_decode.py --points 131072x1 --modes b2b,no_pdl --split-skew "$BEST" \
    --out "$OUT/${T}_trace.json" > "$OUT/${T}_trace.log" 2>&1
  t "trace rc=$?"; grep -E "call|balance|end" "$OUT/${T}_trace.log" | head -8 | cut -c1-200
  [ $(left) -ge 100 ] && issue7_rows 131072 1 128k_skew "--split-skew $BEST"
fi
[ $(left) -ge 90 ] && issue7_rows 131072 1 128k
[ $(left) -ge 40 ] && issue7_rows 32768 1 32k
