#!/bin/bash
# Fifty-first session, an H200 with the session's last ~400 s of device time (carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s51h.sh
# README's H200 columns are the thirty-fifth session's: issue 7's headline rows with every peer (fp16 and log8
# records) first, then the batch-1 variants (8 pairs) at 128K / 32K, fp16 records, for the H200's VARIANT_RULES row
# (the default, eighteenth session's), then the log8 GPU tests. One tarball comes back.
set -u
T="$(date +%Y-%m-%d)_s51h"
source bench/gpu_env.sh
start_call
issue7_rows 131072,32768 32,1 key "--also-log8"
[ $(left) -gt 60 ] && variant_sweep 131072x1,32768x1 4,7,11,14 var_b1_fp16 40
[ $(left) -gt 45 ] && log8_tests 40
t done
pack_out
