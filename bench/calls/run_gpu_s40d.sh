#!/bin/bash
# Fortieth session, fourth call. Any card, one GPU, < 5 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s40d.sh
# Calls s40 / s40c: at batch 1, 2 + 31 splits (two CTAs per SM, one wave) beat the plan's 2 + 14 (one CTA per SM) by
# 1.1-1.6 us from 48K to 80K and tie at 32K. A split model in which the CTAs of a one-wave grid that share an SM
# overlap their start (one cta_overhead per SM instead of one per CTA) picks 31 there; on the CPU it also changes
# batch 1 at 16K, batch 2 at 4K / 8K and batch 8 at 16K (variant 0: 5 + 11 -> 5 + 3), at head_dim 128 and 64. Each
# changed point, old against new split counts, three alternating rounds.
set -u
T="$(date +%Y-%m-%d)_s40d"
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
P4=16384x1=3+13,16384x1=3+30,4096x2=3+5,4096x2=3+13,8192x2=3+5,8192x2=3+13,32768x1=2+14,32768x1=2+31
P11=16384x1=3+13,16384x1=3+30,32768x1=2+14,32768x1=2+31,65536x1=2+14,65536x1=2+31,4096x2=3+5,4096x2=3+13,8192x2=3+5,8192x2=3+13
for r in 1 2 3; do
  variant_sweep "" 4 v4_r$r 20 "--sweep-splits $P4"
  variant_sweep "" 0 v0_r$r 20 "--sweep-splits 16384x8=5+11,16384x8=5+3"
  variant_sweep "" 11 d64_r$r 20 "--sweep-splits $P11 --head-dim 64"
done
