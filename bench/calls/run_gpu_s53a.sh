#!/bin/bash
# Fifty-third session, H100 or H200 (carry [".whl", ".kcache"]; .kcache holds main's library and its trace build):
#   BUDGET=<s> OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s53a.sh
# Is the end of a batch-1 decode call (epilogue + merge: ~2,000 SASS instructions run once per CTA, 3.6-4.5 us
# after the last tile) paced by instruction fetch? (1) bench/icache_probe.py: cold vs warm cycles per instruction of
# straight-line code; (2) Nsight's per-instruction stall reasons at 32K batch 1 (the end region's "no instruction"
# share); (3) the trace build's timeline of main at 32K / 128K batch 1. One tarball comes back.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s53a}"
source bench/gpu_env.sh
start_call
python3 bench/icache_probe.py --json "$OUT/${T}_icache.json" > "$OUT/${T}_icache.log" 2>&1; t "icache rc=$?"
cat "$OUT/${T}_icache.log"
[ $(left) -gt 200 ] && ncu_source "32768 1 4"
[ $(left) -gt 60 ] && timeout $(( $(left) - 20 )) python3 bench/trace_decode.py --points 32768x1,131072x1 \
  --modes b2b,no_pdl --out "$OUT/${T}_trace.json" > "$OUT/${T}_trace.log" 2>&1
t "trace rc=$?"; grep -E "^trace|SM loop" "$OUT/${T}_trace.log" | cut -c1-400
t done
pack_out
