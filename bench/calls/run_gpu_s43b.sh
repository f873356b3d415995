#!/bin/bash
# Forty-third session, after s43, for an H200 (its issue 8 rows are the thirteenth / twenty-eighth sessions'). Any card,
# one GPU, < 10 min, carry [".whl", ".kcache"]:
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s43b.sh
# run_gpu_s41c.sh's issue 8 batch-1 table (Qwen3-8B, then Qwen3-4B, at 8K / 32K / 64K / 128K; random bf16 weights,
# compiled step replayed from a CUDA graph, BF16 with cuDNN SDPA run the same way) under the s43b file tag, then the
# 8B's throughput at equal KV memory (40 GiB at 32K) with what the call has left.
set -u
T="$(date +%Y-%m-%d)_s43b"
source bench/gpu_env.sh
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_s43
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
summary() {
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
for m in qwen3-8b qwen3-4b; do
  [ $(left) -ge 150 ] || break
  timeout $(( $(left) - 5 )) python3 bench/bench_model.py --models $m --contexts 8192,32768,65536,131072 \
    --modes compiled --tput-context 0 --fuse-projections --steps 20 --compiled-bf16-backends CUDNN_ATTENTION \
    --out "$OUT/${T}_$m.json" > "$OUT/${T}_$m.log" 2>&1
  t "bench_model $m rc=$?"; grep -E "rror" "$OUT/${T}_$m.log" | tail -3 | cut -c1-250
  [ -s "$OUT/${T}_$m.json" ] && summary "$OUT/${T}_$m.json"
done
[ $(left) -ge 200 ] && eq_memory qwen3-8b 8b
