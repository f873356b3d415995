#!/bin/bash
# Fiftieth session, for an H200 (the H100 queue was closed; any card runs it), one GPU, < 10 min, carry
# [".whl", ".kcache"] (.kcache: the library of this tree, 53fc8fb8):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s50h.sh
# README's H200 columns are the thirty-fifth session's and its VARIANT_RULES row (the default) the eighteenth's.
# Most important first, as the call may be cut:
# 1. the log8 GPU tests (variant 14 on log8 records for the first time);
# 2. issue 7's headline rows with every peer, fp16 and log8 records (32K b1 also at 2 + 31 splits);
# 3. the variants at batch 1 (8 pairs) from 32K to 128K, fp16 and log8 records; at 128K batch 8 (64 pairs) and at
#    batch 32 (256 pairs), fp16 and log8;
# 4. the headline rows again (a second round).
set -u
T="$(date +%Y-%m-%d)_s50h"
source bench/gpu_env.sh
start_call
log8_tests 150
issue7_rows 131072,32768 32,1 key "--also-log8 --alt-splits 32768x1=2+31"
[ $(left) -gt 200 ] && variant_sweep 131072x1,98304x1,65536x1,32768x1 4,7,11,14 var_b1_fp16 150
[ $(left) -gt 180 ] && variant_sweep 131072x1,98304x1,65536x1,32768x1 4,7,11,14 var_b1_log8 150 "--scale-dtype log8"
[ $(left) -gt 170 ] && variant_sweep 131072x8,32768x8 0,4,11 var_b8 150
[ $(left) -gt 160 ] && variant_sweep 131072x32,32768x32 0,7,10,11 var_b32_fp16 150
[ $(left) -gt 150 ] && variant_sweep 131072x32 0,7,10,11 var_b32_log8 140 "--scale-dtype log8"
[ $(left) -gt 130 ] && issue7_rows 131072,32768 32,1 again "--also-log8"
t done
