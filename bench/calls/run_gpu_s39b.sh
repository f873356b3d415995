#!/bin/bash
# Thirty-ninth session, branch s39-slices: merge slices (CudaDecodeConfig.merge_slices). Any card, one GPU, < 10 min,
# carry [".whl", ".kcache"] with the tree's library and its trace build prebuilt into .kcache on the CPU machine
# (docs/KERNELS.md, "Build"; the trace source is bench/trace_decode.py's use_trace_build output):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s39b.sh
# Why: at batch 1 the merge after the last arrival costs 2.4 us at 32K and 3.1 at 128K (s31c's probes: full against
# no merge), one CTA loading every split's partials and combining them; with slices the last n CTAs to arrive each
# merge 1 / n of the outputs. 32K b1 needs ~1.3 us for 4x BF16, 128K b1 ~1 us for 6x (H100).
# 1. the kernel GPU tests (the new slice tests among them);
# 2. merge_slices 1 / 2 / 4 / 8 alternating, three rounds, variants 7 and 4 at 128K / 96K / 64K / 32K / 16K / 4K b1
#    (the plan's splits);
# 3. traces at 128K and 32K b1 with 4 slices (b2b);
# 4. issue 7's 128K and 32K batch-1 rows with 4 slices, every peer in the same run.
set -u
T="$(date +%Y-%m-%d)_s39b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s39b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
kernel_tests 200
P=131072x1,98304x1,65536x1,32768x1,16384x1,4096x1
for r in 1 2 3; do
  for k in 1 2 4 8; do variant_sweep $P 7,4 k${k}_r$r 170 "--merge-slices $k"; done
done
[ $(left) -ge 150 ] && { timeout 60 python3 bench/trace_decode.py --points 131072x1,32768x1 --modes b2b --merge-slices 4 \
  --out $OUT/${T}_trace_k4.json > $OUT/${T}_trace_k4.log 2>&1; t "trace k4 rc=$?"; grep "^trace" $OUT/${T}_trace_k4.log | cut -c1-400; }
[ $(left) -ge 100 ] && issue7_rows 131072 1 128k_k4 "--merge-slices 4"
[ $(left) -ge 40 ] && issue7_rows 32768 1 32k_k4 "--merge-slices 4"
