#!/bin/bash
# Thirteenth session, device call F (issue 7), < 3 min on one H200, carry [".whl", ".kcache"]:
#   bash bench/calls/run_gpu_s13f.sh
# Does the pool's access pattern cap the batch-1 stream? The records of a 32K / 128K batch-1 pool read the way
# the decode kernel reads tiles and nothing else (bench_decode --read-records): block-outer (contiguous) vs
# head-outer (one KV head's 1152-byte records, 9216 bytes apart, in the table's random block order, as a split
# reads them), at the best grid and at the decode kernel's batch-1 grid; beside the read floor of the same run.
set -u
T="$(date +%Y-%m-%d)_s13f"
source bench/gpu_env.sh
for r in 1 2; do
timeout 100 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --no-flashinfer \
  --contexts 32768 --batches 1 --read-records 32768x1,131072x1,131072x32 --read-floor 32768x1,131072x1,131072x32 \
  --out "$OUT/${T}_records$r.json" > "$OUT/${T}_records$r.log" 2>&1
t "records $r rc=$?"; grep -E "^read|^L=|Error|error" "$OUT/${T}_records$r.log" | cut -c1-330
done
