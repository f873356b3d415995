#!/bin/bash
# Fifty-second session, an H200 (carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> [TAG=s52d] bash bench/calls/run_gpu_s52a.sh
# README's H200 columns are the thirty-fifth session's (before the ring's phase 0, variant 7, the filled slots and
# FlashInfer's pages of 64). Issue 7's headline rows with every peer (fp16 and log8 records) through today's plan
# (the H200 has no VARIANT_RULES / FILL_TILES row: the defaults), the bare read of the bytes at the batch-1 points,
# then the batch-1 variants at the plan's splits and at the H100's filled slots (2 + 31), the batch-32 variants, and
# the log8 GPU tests. One tarball comes back.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s52a}"
source bench/gpu_env.sh
start_call
issue7_rows 131072,32768 32,1 key "--also-log8 --read-floor 131072x1,32768x1"
[ $(left) -gt 150 ] && variant_sweep 131072x1,32768x1 4,7,11,14 var_b1 150
[ $(left) -gt 110 ] && variant_sweep 131072x1 4,7,11,14 var_b1_fill 110 \
  "--sweep-splits 131072x1=2+31,32768x1=2+31,32768x1=2+14,65536x1=2+31"
[ $(left) -gt 70 ] && variant_sweep 131072x32 0,7,10,11 var_b32 70
[ $(left) -gt 95 ] && log8_tests 90
t done
pack_out
