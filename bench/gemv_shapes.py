"""Batch-1 projection GEMMs of the bench models (issue 8): how close each reaches the copy bandwidth.

    PYTHONPATH=src python3 bench/gemv_shapes.py --out $OUT/gemv.json

The profile of a compiled decode step (bench/profile_step.py) shows the weight GEMMs as most of the step
once the small ops are fused. Per projection shape [N, K] of Qwen3-4B / Qwen3-8B (and the fused QKV
and gate+up shapes a fused-projection model would run) this times, inside a CUDA graph of many calls on
distinct weight copies (more than the L2 cache, so every call reads its weight from HBM):
``F.linear(x, W)`` (what transformers runs), ``torch.mv(W, x)`` and, for reference, the bytes-ideal.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decode import copy_bandwidth, time_calls  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"qwen3-4b": dict(h=2560, i=9728, hq=32, hkv=8, d=128), "qwen3-8b": dict(h=4096, i=12288, hq=32, hkv=8, d=128)}


def shapes(m):
    h, i, q, kv = m["h"], m["i"], m["hq"] * m["d"], m["hkv"] * m["d"]
    return {"q_proj": (q, h), "k_proj": (kv, h), "o_proj": (h, q), "gate_proj": (i, h), "down_proj": (h, i),
            "qkv_fused": (q + 2 * kv, h), "gate_up_fused": (2 * i, h)}


def time_graph(fn, reps=20):
    """Median microseconds of one graph-replayed ``fn()`` (bench_decode's timer, one rule for timing)."""
    return time_calls([fn], reps=reps) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gemv.json")
    ap.add_argument("--bytes-per-shape", type=float, default=256e6)
    args = ap.parse_args()
    dev = "cuda"
    bw = copy_bandwidth(dev)[0]
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "torch": torch.__version__,
           "device": torch.cuda.get_device_name(), "copy_bandwidth_bytes_per_s": bw, "rows": []}
    print(f"copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)
    seen = {}
    for model, m in MODELS.items():
        for name, (N, K) in shapes(m).items():
            if (N, K) in seen:
                out["rows"].append({**seen[(N, K)], "model": model, "name": name})
                continue
            wbytes = N * K * 2
            copies = max(4, int(args.bytes_per_shape // wbytes))
            ws = [torch.randn(N, K, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            x = torch.randn(1, K, device=dev, dtype=torch.bfloat16)
            xv = x[0]
            row = {"model": model, "name": name, "N": N, "K": K, "weight_bytes": wbytes,
                   "ideal_us": wbytes / bw * 1e6}
            for label, f in (("linear", lambda w: F.linear(x, w)), ("mv", lambda w: torch.mv(w, xv)),
                             ("t_matmul", lambda w: (w @ x.t()).t())):
                try:
                    us = time_graph(lambda: [f(w) for w in ws]) / copies
                    row[f"{label}_us"] = us
                    row[f"{label}_tbps"] = wbytes / (us / 1e6) / 1e12
                except Exception as e:  # noqa: BLE001
                    row[f"{label}_error"] = f"{type(e).__name__}: {e}"[:200]
            seen[(N, K)] = {k: v for k, v in row.items() if k not in ("model", "name")}
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
            del ws
            torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
