"""Where a decode step's time goes (issue 8): torch.profiler over one model decode step, OSCAR vs BF16,
uncompiled vs ``torch.compile``d, each as run by bench/bench_model.py (same sessions, same graphs).

    PYTHONPATH=src python3 bench/profile_step.py --model qwen3-4b --context 8192 --out $OUT/profile.json
    PYTHONPATH=src python3 bench/profile_step.py --smoke          # tiny config on CPU: checks the script

Per (method, mode) it profiles one step run outside the CUDA graph (every kernel launched, as the graph
records it) and ``--replays`` replays of the captured graph, and reports: kernels per step, GPU kernel
time per step, graph replay time (CUDA events), the top kernels by total time and the time per kernel
class (GEMM, attention, fused Triton, elementwise / reduction, copies).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import torch

SMOKE = "--smoke" in sys.argv
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import bench_model as bm  # noqa: E402

CLASSES = (  # first match wins; inductor's kernels first (their names list the fused ops, e.g. "paged_decode")
    ("triton_fused", ("triton_poi", "triton_per", "triton_red", "triton_tem")),
    ("attention", ("flash", "fmha", "cudnn", "attn", "decode", "oscar", "sdpa", "split_kv", "combine")),
    ("gemm", ("gemm", "gemv", "cutlass", "xmma", "nvjet", "sm90", "cublas", "splitk", "dot_kernel", "mm_")),
    ("append", ("append", "write_kv", "quantize")),
    ("copy", ("memcpy", "memset", "copy", "cat", "index")),
    ("elementwise", ("elementwise", "reduce", "vectorized", "unrolled", "rsqrt", "pow", "mean", "mul", "add")),
)


def classify(name: str) -> str:
    n = name.lower()
    for cls, keys in CLASSES:
        if any(k in n for k in keys):
            return cls
    return "other"


def kernels(prof, nsteps: int) -> dict:
    """Kernel statistics of a profile covering ``nsteps`` steps (device-side events only)."""
    rows = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        r = rows.setdefault(e.name, [0, 0.0])
        r[0] += 1
        r[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    n_k = sum(c for c, _ in rows.values()) / nsteps
    tot = sum(t for _, t in rows.values()) / nsteps
    by_cls: dict = {}
    for name, (c, t) in rows.items():
        k = by_cls.setdefault(classify(name), [0.0, 0.0])
        k[0] += c / nsteps
        k[1] += t / nsteps
    top = sorted(rows.items(), key=lambda kv: -kv[1][1])[:15]
    return {"kernels_per_step": n_k, "kernel_us_per_step": tot,
            "classes": {k: {"count": round(c, 1), "us": round(t, 1)} for k, (c, t) in sorted(by_cls.items(), key=lambda kv: -kv[1][1])},
            "top": [{"name": n[:140], "count_per_step": c / nsteps, "us_per_step": round(t / nsteps, 1), "class": classify(n)}
                    for n, (c, t) in top],
            # every kernel (the diff of two methods' lists shows which kernels one step has that the other has not)
            "all": [{"name": n[:200], "count_per_step": c / nsteps, "us_per_step": round(t / nsteps, 2)}
                    for n, (c, t) in sorted(rows.items())]}


def profile(fn, n: int, device: str):
    from torch.profiler import ProfilerActivity, profile as tprof

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device != "cpu" else [])
    bm.sync(device)
    with tprof(activities=acts) as p:
        for _ in range(n):
            fn()
        bm.sync(device)
    return p


def one(method: str, compile: bool, model, cfg, rot, args, device) -> dict:
    res = {"method": method, "compiled": compile}
    t0 = time.perf_counter()
    if method == "oscar":
        cm = bm.oscar_session(model, cfg, rot, args.context, args.batch, 8, device, compile)
    else:
        cm = bm.bf16_session(model, cfg, args.context, args.batch, device, compile)
    with cm as s:
        if method == "oscar":
            dec = s["dec"]
            graph, step = s["graph"], s["step"]

            def eager():
                dec.use_graph, keep = False, dec.use_graph
                try:
                    s["step"]()
                finally:
                    dec.use_graph = keep
        else:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            be = None if device == "cpu" else args.bf16_backend
            graph, step = bm.capture_bf16(s, device, compile, be)

            def eager():
                ctx = sdpa_kernel([getattr(SDPBackend, be)]) if be else contextlib.nullcontext()
                with torch.no_grad(), ctx:
                    s["reset"]()
                    s["fwd"]()
        res["warmup_s"] = time.perf_counter() - t0
        eager()
        res["outside_graph"] = kernels(profile(eager, 1, device), 1)
        if graph is not None:
            res["replay_ms"] = bm.replay_ms(graph, 20, device, before=s.get("reset"))
            res["graph"] = kernels(profile(step, args.replays, device), args.replays)
        else:
            res["step_ms"] = bm.time_steps(step, 3, device) * 1e3
    bm.log(f"{method:5s} compiled={compile}: {json.dumps({k: v for k, v in res.items() if k not in ('outside_graph', 'graph')})}")
    for where in ("outside_graph", "graph"):
        if where in res:
            r = res[where]
            bm.log(f"  {where}: {r['kernels_per_step']:.0f} kernels/step, {r['kernel_us_per_step']:.0f} us kernel time/step; "
                   f"classes {json.dumps(r['classes'])}")
            for t in r["top"][:10]:
                bm.log(f"     {t['us_per_step']:8.1f} us {t['count_per_step']:6.1f}x  [{t['class']}] {t['name'][:110]}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen3-4b")
    ap.add_argument("--context", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--modes", default="graph,compiled")
    ap.add_argument("--methods", default="oscar,bf16")
    ap.add_argument("--bf16-backend", default="CUDNN_ATTENTION")
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--fuse-projections", action="store_true")
    ap.add_argument("--out", default="profile_step.json")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    device, cfg, model, rot = bm.setup(args.model, args.smoke, args.fuse_projections)
    if args.smoke:
        args.context = min(args.context, 256)
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv, "torch": torch.__version__,
           "model": "tiny" if args.smoke else args.model, "fuse_projections": args.fuse_projections, "context": args.context, "batch": args.batch, "runs": []}
    for mode in args.modes.split(","):
        for method in args.methods.split(","):
            try:
                out["runs"].append(one(method, mode == "compiled", model, cfg, rot, args, device))
            except Exception as e:
                out["runs"].append({"method": method, "compiled": mode == "compiled",
                                    "error": bm.error_text(e)})
                bm.log(f"{method} {mode}: ERROR {out['runs'][-1]['error']}")
            Path(args.out).write_text(json.dumps(out, indent=1))
    bm.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
