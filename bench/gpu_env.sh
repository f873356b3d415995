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
# issue 8's throughput at equal KV memory (40 GiB at 32K; OSCAR at the largest batch its pools fit against BF16 with
# cuDNN SDPA) for model $1 ($2: a file tag, default $1), into $OUT/${T}_eq_<tag>.{json,log}, within the call's budget
eq_memory() {
  local tag=${2:-$1}
  timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models "$1" --contexts "" --modes compiled \
    --tput-context 32768 --fuse-projections --steps 32 --compiled-bf16-backends CUDNN_ATTENTION \
    --out "$OUT/${T}_eq_$tag.json" > "$OUT/${T}_eq_$tag.log" 2>&1
  t "equal memory $tag rc=$?"; grep -E "equal|Error|error" "$OUT/${T}_eq_$tag.log" | cut -c1-240
}
# issue 7's rows with every peer in the same run at context $1 (batches $2), PDL and early reads on, into
# $OUT/${T}_<tag>.{json,log} ($3: the tag, e.g. 128k; $4: more bench_decode arguments, e.g. "--head-dim 64")
issue7_rows() {
  timeout 150 python3 bench/bench_decode.py --pdl 1 --early-reads 1 --no-triton --no-append --contexts "$1" \
    --batches "$2" ${4:-} --out "$OUT/${T}_$3.json" > "$OUT/${T}_$3.log" 2>&1
  t "$3 rc=$?"; grep -E "^L=|copy bandwidth|rror" "$OUT/${T}_$3.log" | cut -c1-330
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
