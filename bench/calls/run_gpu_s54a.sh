#!/bin/bash
# For the next session (fifty-fourth), H100 or H200 (carry [".whl", ".kcache"]; .kcache: this tree's library, built on
# the CPU machine with `OSCARKV_KERNEL_CACHE=$PWD/.kcache python -c "from oscarkv.kernels import cuda_ops; cuda_ops.build()"`):
#   BUDGET=<s> OSCARKV_COMMIT=<HEAD> bash bench/calls/run_gpu_s54a.sh
# The fifty-third session's lean end of the decode call ran the GPU kernel tests (243 passed) but not the other GPU
# suites. First the paged cache (CUDA graphs, generate), the vLLM-shaped backend, the new > 64-splits merge test and
# the log8 tests; then issue 7's rows with every peer (fp16 and log8 records) and the bare read, the opt-in poll merge
# (no arrival atomic; the merger's code runs every round, so it stays in its SM's instruction cache) against the
# default last-CTA merge, alternating (first, as the session's next kernel work hangs on it), then issue 8's batch-1 table for the 8B model (the model step with the new
# end). One tarball comes back.
set -u
T="$(date +%Y-%m-%d)_${TAG:-s54a}"
source bench/gpu_env.sh
start_call
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/vllm/test_gpu_vllm_shapes.py \
  "tests/kernels/test_cuda_kernels.py::test_cuda_decode_more_than_64_splits_merge" -rs > "$OUT/${T}_tests_gpu.log" 2>&1
t "paged + vLLM GPU tests rc=$?"; tail -1 "$OUT/${T}_tests_gpu.log"; grep -E "^FAILED|Error" "$OUT/${T}_tests_gpu.log" | head -5
for r in 1 2; do
  [ $(left) -gt 160 ] && variant_sweep 32768x1,131072x1 4,7 merge_last$r 100
  [ $(left) -gt 160 ] && variant_sweep 32768x1,131072x1 4,7 merge_poll$r 100 "--poll-merge"
done
[ $(left) -gt 200 ] && issue7_rows 131072,32768 32,1 key "--also-log8 --read-floor 131072x1,32768x1"
[ $(left) -gt 100 ] && log8_tests 90
[ $(left) -gt 200 ] && batch1_table "qwen3-8b"
t done
pack_out
