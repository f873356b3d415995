#!/bin/bash
# Planned for the next session (issue 7; not run yet), < 5 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/run_gpu_next.sh
# Which SASS instructions of the INT2 tile loop the warps stall on, and why: Nsight Compute's per-instruction
# stall sampling (source page, SASS view, CSV) for one call at 128K batch 32 (variant 0) and batch 1
# (variant 4). The seventh session measured 58.7% issue efficiency with no pipe saturated, and neither a
# software pipeline nor 18 warps per SM helped; this says where the remaining cycles sit.
set -u
T="$(date +%Y-%m-%d)_next"
source bench/gpu_env.sh
for pt in "131072 32 0" "131072 1 4"; do
  tag=$(echo $pt | tr ' ' '_')
  timeout 150 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
    python3 bench/ncu_one.py $pt > "$OUT/${T}_ncu_source_${tag}.csv" 2>&1
  t "ncu source $pt rc=$?"
  # the 40 SASS lines with the most stall samples
  python3 - "$OUT/${T}_ncu_source_${tag}.csv" <<'PY' | head -45
import csv, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
head, body = rows[0], rows[1:]
col = next((i for i, h in enumerate(head) if h.startswith("Warp Stall Sampling (All")), None)
if col is None:
    print("no stall-sampling column; header:", head[:12]); sys.exit()
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
tot = sum(num(r[col]) for r in body) or 1
for r in sorted(body, key=lambda r: -num(r[col]))[:40]:
    print(f"{100 * num(r[col]) / tot:5.1f}%  " + "  ".join(r[:3])[:150])
PY
done
