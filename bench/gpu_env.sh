# Shared set-up of the device-call scripts (bench/calls/run_gpu_s4*.sh), sourced from the repo root on the GPU
# machine: $OUT, the carried wheels (FlashInfer, its TVM FFI, transformers 5.24) into /tmp/site, the
# environment, and t() for elapsed-time lines. The device's copy of the tree has stale git metadata: name the commit
# in the run command (OSCARKV_COMMIT=$(git rev-parse --short HEAD) written out here, e.g. `OSCARKV_COMMIT=60321c3 bash
# bench/calls/...`) so that the results' JSON names it (oscarkv.fileio.source_commit).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WHL=$(ls .whl/flashinfer_python-*.whl .whl/apache_tvm_ffi-*.whl .whl/transformers-5.24.0-py3-none-any.whl 2>/dev/null | tr '\n' ' ')
[ -n "$WHL" ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site $WHL > /dev/null 2>&1
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST=9.0 PYTHONPATH=/tmp/site:$PWD/src
[ -d .kcache ] && export OSCARKV_KERNEL_CACHE=$PWD/.kcache  # kernel library prebuilt on the CPU machine, if carried
T0=$(date +%s); t() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
# seconds left of this call (BUDGET: what the call may take, default 585 of the 600-second limit)
left() { echo $(( ${BUDGET:-585} - $(date +%s) + T0 )); }
# a call's first lines: the card, then the kernel library (loaded from the carried .kcache, or built here)
start_call() {
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c "from oscarkv.kernels import cuda_ops; print(cuda_ops.build())"; t "library"
}
# the call's files as one tarball $OUT/${T}_all.tar.gz (the device returns at most 8 files), listed at the end
pack_out() {
  (cd "$OUT" && tar czf "${T}_all.tar.gz" --remove-files ${T}_*.log ${T}_*.json ${T}_*.txt 2>/dev/null); ls "$OUT"
}
# Nsight Compute on one decode call, bench/ncu_one.py's arguments $1 (e.g. "131072 1 14 log8"): launch, occupancy,
# warp-state, instruction, scheduler and memory sections into $OUT/${T}_ncu_<tag>.txt, its key lines printed
ncu_point() {
  local tag=$(echo $1 | tr ' ' '_')
  timeout 120 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section InstructionStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    python3 bench/ncu_one.py $1 > "$OUT/${T}_ncu_${tag}.txt" 2>&1
  t "ncu $tag rc=$?"
  grep -E "^ +(Duration|Issue Slots Busy|DRAM Throughput|No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction|Executed Instructions|Registers Per Thread|Achieved Occupancy) " \
    "$OUT/${T}_ncu_${tag}.txt" | sed 's/  */ /g' | head -12
}
# the decode loop's stalls per SASS instruction of one call ($1 as ncu_point's): $OUT/${T}_stalls_<tag>.txt
# (bench/ncu_stalls.py) and the source-page CSV it reads, gzipped
ncu_source() {
  local tag=$(echo $1 | tr ' ' '_')
  timeout 150 ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
    python3 bench/ncu_one.py $1 > "$OUT/${T}_ncu_source_${tag}.csv" 2>&1
  t "ncu source $tag rc=$?"
  python3 bench/ncu_stalls.py "$OUT/${T}_ncu_source_${tag}.csv" --top 30 > "$OUT/${T}_stalls_${tag}.txt" 2>&1
  head -16 "$OUT/${T}_stalls_${tag}.txt" | cut -c1-300
  gzip -f "$OUT/${T}_ncu_source_${tag}.csv"
}
# issue 8's throughput at equal KV memory (40 GiB at 32K; OSCAR at the largest batch its pools fit against BF16 with
# cuDNN SDPA) for model $1 ($2: a file tag, default $1; $3: more bench_model arguments, e.g. "--scale-dtype log8"),
# into $OUT/${T}_eq_<tag>.{json,log}, within the call's budget
eq_memory() {
  local tag=${2:-$1}
  timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models "$1" --contexts "" --modes compiled \
    --tput-context 32768 --fuse-projections --steps 32 --compiled-bf16-backends CUDNN_ATTENTION ${3:-} \
    --out "$OUT/${T}_eq_$tag.json" > "$OUT/${T}_eq_$tag.log" 2>&1
  t "equal memory $tag rc=$?"; grep -E "equal|Error|error" "$OUT/${T}_eq_$tag.log" | cut -c1-240
}
# issue 7's rows with every peer in the same run at context $1 (batches $2), PDL and early reads on, into
# $OUT/${T}_<tag>.{json,log} ($3: the tag, e.g. 128k; $4: more bench_decode arguments, e.g. "--head-dim 64")
issue7_rows() {
  timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts "$1" \
    --batches "$2" ${4:-} --out "$OUT/${T}_$3.json" > "$OUT/${T}_$3.log" 2>&1
  t "$3 rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_$3.log" | cut -c1-420  # (420: --also-log8's column too)
}
# the paged-cache (CUDA graphs, generate) and vLLM-shaped GPU tests within $1 seconds, into
# $OUT/${T}_tests_gpu$2.log ($2: a file suffix, e.g. _C, also named in the printed line)
paged_tests() {
  timeout "$1" python3 -m pytest -q -p no:cacheprovider tests/cache/test_gpu_paged.py tests/vllm/test_gpu_vllm_shapes.py \
    -rs > "$OUT/${T}_tests_gpu${2:-}.log" 2>&1
  t "paged + vLLM GPU tests${2:+ (${2#_})} rc=$?"; tail -1 "$OUT/${T}_tests_gpu${2:-}.log"
  grep -E "^FAILED|Error" "$OUT/${T}_tests_gpu${2:-}.log" | head -5
}
# the log8-record GPU tests (kernels, the CUDA-graph paged cache, the vLLM backend's log8 pages) within $1 seconds
# (default 200), into $OUT/${T}_tests_log8.log
log8_tests() {
  timeout "${1:-200}" python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py \
    tests/cache/test_gpu_paged.py tests/vllm/test_gpu_vllm_shapes.py -k log8 -rs > "$OUT/${T}_tests_log8.log" 2>&1
  t "log8 tests rc=$?"; tail -1 "$OUT/${T}_tests_log8.log"; grep -E "^FAILED|Error" "$OUT/${T}_tests_log8.log" | head -8
}
# issue 8's step_ablate of model $1 at 128K batch 1 (BF16 with cuDNN SDPA), into $OUT/${T}_ablate_$1.{json,log}, within
# the call's budget
ablate_128k() {
  timeout $(( $(left) - 5 )) python3 bench/step_ablate.py --model "$1" --context 131072 --bf16-backends CUDNN_ATTENTION \
    --out "$OUT/${T}_ablate_$1.json" > "$OUT/${T}_ablate_$1.log" 2>&1
  t "ablate $1 128K rc=$?"; tail -3 "$OUT/${T}_ablate_$1.log" | cut -c1-250
}
# the kernel GPU tests ($2: extra pytest arguments, e.g. "-k default_variant") within $1 seconds (default 150), into
# $OUT/${T}_tests.log
kernel_tests() {
  timeout "${1:-150}" python3 -m pytest -q -p no:cacheprovider tests/kernels/test_cuda_kernels.py ${2:-} \
    > "$OUT/${T}_tests.log" 2>&1
  t "kernel tests rc=$?"; tail -1 "$OUT/${T}_tests.log"; grep -E "^FAILED|Error" "$OUT/${T}_tests.log" | head -5
}
# our kernel's variants $2 (e.g. 0,4,7) at the plan's split counts at points $1 (LxB,...), into $OUT/${T}_$3.log,
# leaving $4 seconds (default 60) of the call's budget ($5: more bench_decode arguments, e.g. "--merge-slices 4", or
# "--sweep-splits 131072x1=1+31,..." to time explicit split counts instead of $1's points at the plan's)
variant_sweep() {
  timeout $(( $(left) - ${4:-60} )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
    --no-triton --no-append --sweep --sweep-variants "$2" --sweep-scales 1.0 --sweep-points "$1" ${5:-} \
    > "$OUT/${T}_$3.log" 2>&1
  t "sweep $3 rc=$?"; grep -E "^sweep|rror" "$OUT/${T}_$3.log" | cut -c1-110
}
# issue 8's batch-1 table at 8K / 32K / 64K / 128K for each model of $1 (e.g. "qwen3-8b qwen3-4b"; random bf16
# weights, compiled step replayed from a CUDA graph, BF16 with cuDNN SDPA run the same way) into
# $OUT/${T}_<model>.{json,log}, one printed line per row from the JSON, within the call's budget
_batch1_summary() {
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for m in d["models"]:
    for r in m["batch1"]:
        o, b = r.get("oscar_compiled"), r.get("bf16_compiled")
        if not o or not b:
            print(m["model"], r["context"], "incomplete row"); continue
        sp, ideal = b["replay_ms"] / o["replay_ms"], b["ideal_ms"] / o["ideal_ms"]
        print(f'{m["model"]} {r["context"]:>6}: oscar {o["step_ms"]:.3f} ({o["replay_ms"]:.3f}) ideal {o["ideal_ms"]:.3f} | '
              f'bf16 {b["step_ms"]:.3f} ({b["replay_ms"]:.3f}) ideal {b["ideal_ms"]:.3f} | {sp:.3f}x of {ideal:.3f}x '
              f'= {100 * sp / ideal:.1f}% | {o["kv_bytes_per_token"]:.0f} B/token {o["bits_per_element_allocated"]:.2f} bits')
print(f'copy {d["copy_bandwidth_bytes_per_s"] / 1e12:.3f} TB/s, {d.get("device")}, commit {d.get("commit")}')
PY
}
batch1_table() {
  for m in $1; do
    [ $(left) -ge 150 ] || break
    timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models $m --contexts 8192,32768,65536,131072 \
      --modes compiled --tput-context 0 --fuse-projections --steps 20 --compiled-bf16-backends CUDNN_ATTENTION \
      --out "$OUT/${T}_$m.json" > "$OUT/${T}_$m.log" 2>&1
    t "bench_model $m rc=$?"; grep -E "rror" "$OUT/${T}_$m.log" | tail -3 | cut -c1-250
    [ -s "$OUT/${T}_$m.json" ] && _batch1_summary "$OUT/${T}_$m.json"
  done
}
# bench_decode's fixed-cost diagnosis (bench_diag: the call with either tier emptied, probes) at "$1" (e.g.
# "32768x1:4,131072x1:7") into $OUT/${T}_diag_$2.log, each point's line printed
diag_points() {
  timeout $(( $(left) - ${3:-30} )) python3 bench/bench_decode.py --pdl 1 --early-reads 1 --contexts "" --no-flashinfer \
    --no-triton --no-append --diag "$1" > "$OUT/${T}_diag_$2.log" 2>&1
  t "diag $2 rc=$?"; grep -E "^diag|rror" "$OUT/${T}_diag_$2.log" | cut -c1-400
}
# A/B of two kernel sources, alternating per process: variant_sweep "$1" "$2" "<$3>_A<r>" "$4" with OSCARKV_KERNEL_SRC=$5
# (A), then the same with $6 (B; "tree": this tree's int2_paged.cu), for $7 rounds (default 2); $8: more bench_decode
# arguments (variant_sweep's $5, e.g. "--sweep-splits 32768x1=1+15,..."). Each source's library is prebuilt on the
# CPU machine into the carried .kcache (keyed by the source's text), so nothing compiles here.
src_ab() {
  local r src who
  for r in $(seq 1 "${7:-2}"); do
    for who in A B; do
      [ $(left) -gt $(( ${4:-60} + 15 )) ] || return 0
      src=$5; [ $who = B ] && src=$6
      if [ "$src" = tree ]; then src=$PWD/src/oscarkv/kernels/cuda/int2_paged.cu; fi
      (export OSCARKV_KERNEL_SRC=$src; variant_sweep "$1" "$2" "$3_$who$r" "${4:-60}" "${8:-}")
    done
  done
}
