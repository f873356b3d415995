"""Precision of the CUDA INT2 decode kernel where the attention output is small next to the values.

Seventeenth session (issue 8): in a 128K ``model.generate`` on the random-weight Qwen3-8B every decode call of the
CUDA kernel is within 0.3-0.5% (Frobenius, relative) of the float64 reference, except layer 0: 3%, ten times more,
whose output (absmax 0.04) is an average over 131,072 near-uniformly weighted values (each ~1), so that an error
fixed relative to the *values* is large relative to the *output*. This script builds that case (keys and values
~N(0, 1), a query giving scores of a chosen spread, one sequence, 8 KV heads x 4 query heads, head_dim 128) and
measures, against the float64 references (with the kernel's int8 query, and exact):

* the CUDA kernel with its own plan and with fixed INT2 split counts (the tiles each warp accumulates);
* the Triton kernel (the same pool converted to the logical layout) and the torch backend in float32;
* the floor: the float64 reference rounded to bf16 (the kernels' output dtype);
* ``--same-v``: every value row equal (the output must then be that row, whatever the weights: any error is the
  kernel's arithmetic on the values alone).

``--alt-src FILE.cu`` (repeatable): the CUDA runs again with the library built from another source (e.g. the
committed kernel, to compare a change); build it first where nvcc is (``cuda_ops.build`` keys the cache by source).
``--time-shapes 131072x1,32768x32``: the planned call's time (CUDA events, mean of 50 after 10) per source at those
(context x batch) shapes, so that a precision change is weighed against its cost in the same run.

    PYTHONPATH=src python3 bench/diag_decode_precision.py --out $OUT/precision.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from oscarkv.kernels import (  # noqa: E402
    CudaDecodeConfig, DecodePlan, MixedKVCache, MixedKVPool, cuda_ops, decode_attention, write_kv,
)
from oscarkv.kernels.layout import convert_pool  # noqa: E402
from oscarkv.kernels.paged import POOL_TENSORS  # noqa: E402
from oscarkv.kernels.reference import decode_attention_torch  # noqa: E402
from oscarkv.quant import QuantConfig  # noqa: E402


def errs(a: torch.Tensor, b: torch.Tensor) -> dict:
    a, b = a.double(), b.double()
    return {"fro_rel": float((a - b).norm() / b.norm().clamp_min(1e-30)),
            "max_rel": float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))}


def build(n: int, hkv: int, d: int, v_mean: float, same_v: bool, seed: int, batch: int = 1):
    g = torch.Generator(device="cuda").manual_seed(seed)
    kc, vc = QuantConfig(group_size=d, clip_ratio=0.96), QuantConfig(group_size=d, clip_ratio=0.92)
    blocks = batch * (n // 16 + 64)
    pool = MixedKVPool.allocate(blocks, blocks, 16, hkv, d, kc, vc, device="cuda", layout="tile16")
    cache = MixedKVCache(blocks, blocks, 16, sink=64, recent=256)
    for b in range(batch):  # one sequence at a time: the float32 randoms of one 128K row are 0.5 GB
        cache.add(b)
        k = torch.randn(n, hkv, d, generator=g, device="cuda")
        v = (torch.randn(1 if same_v else n, hkv, d, generator=g, device="cuda") + v_mean).expand(n, hkv, d)
        write_kv(pool, k.bfloat16(), v.bfloat16().contiguous(), cache.plan_append([b], [n]), backend="cuda")
    return pool, cache.metadata(list(range(batch)), device="cuda")


def time_call(q, pool, meta) -> float:
    B, Hq, D = q.shape
    plan = DecodePlan(B, Hq, pool.num_kv_heads, D, meta, "cuda", q.dtype)
    out = torch.empty_like(q)
    for _ in range(10):
        decode_attention(q, pool, meta, plan=plan, out=out)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(50):
        decode_attention(q, pool, meta, plan=plan, out=out)
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1000 / 50


def cases(args):
    for n in args.contexts:
        for s in args.score_std:
            yield dict(n=n, score_std=s, v_mean=0.0, same_v=False)
        if args.same_v:
            yield dict(n=n, score_std=args.score_std[0], v_mean=0.0, same_v=True)
        if args.v_mean:
            yield dict(n=n, score_std=args.score_std[0], v_mean=args.v_mean, same_v=False)


def cuda_runs(q, pool, meta, splits):
    B, Hq, D = q.shape
    out = {}
    plan = DecodePlan(B, Hq, pool.num_kv_heads, D, meta, "cuda", q.dtype)
    out[f"cuda plan {plan.n_hp}+{plan.n_int2}"] = decode_attention(q, pool, meta, plan=plan)
    for ns in splits:
        p = DecodePlan(B, Hq, pool.num_kv_heads, D, meta, "cuda", q.dtype, CudaDecodeConfig(adaptive_splits=False),
                       n_hp_splits=1, n_int2_splits=ns)
        out[f"cuda {p.n_hp}+{p.n_int2}"] = decode_attention(q, pool, meta, plan=p)
    torch.cuda.synchronize()
    return out


def each_source(alt_src):
    """Yields (tag, name) with cuda_ops loading, in turn, the library of this tree's kernel source (tag "", name
    "this tree") and of each ``--alt-src`` file; this tree's again afterwards."""
    main_src = cuda_ops._SRC
    try:
        for src in [None, *alt_src]:
            cuda_ops._SRC, cuda_ops._LIB = Path(src) if src else main_src, None
            yield ("", "this tree") if src is None else (f" [{Path(src).name}]", Path(src).name)
    finally:
        cuda_ops._SRC, cuda_ops._LIB = main_src, None


def test_case(args):
    """The kernel test's case whose longest row (9000 tokens) is 1.7e-2 from the int8-query reference whatever the
    split counts, the other rows 1.6e-3: per row, every backend against both references."""
    sys.path.insert(0, str(ROOT / "tests" / "kernels"))
    from helpers import build as tbuild, rel_err

    lens, d, G, hkv, seed = [1, 77, 335, 336, 1000, 4133, 9000], 64, 1, 2, 65
    cache, pool, ids, _ = tbuild(lens, d=d, hkv=hkv, bs=16, sink=64, recent=256, layout="tile16", device="cuda",
                                 backend="cuda", seed=seed, blocks=sum(lens) // 16 * 2 + 64)
    meta = cache.metadata(ids, device="cuda")
    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(len(lens), hkv * G, d, generator=g) * 2).to("cuda", torch.bfloat16)
    ref8 = decode_attention_torch(q, pool, meta, compute_dtype=torch.float64, int8_int2_query=True)
    ref = decode_attention_torch(q, pool, meta, compute_dtype=torch.float64)
    outs = {"ref int8 query": ref8, "torch fp32": decode_attention_torch(q, pool, meta).bfloat16(),
            "triton": decode_attention(q, convert_pool(pool, "logical"), meta, backend="triton")}
    for tag, _ in each_source(args.alt_src):
        outs["cuda" + tag] = decode_attention(q, pool, meta, backend="cuda")
    # where does the longest row go wrong: its INT2 tier cut to prefixes (same pool, both sides read the same meta),
    # and the same rows written by the torch append instead of the CUDA append
    m6 = cache.metadata([6], device="cuda")
    for cut in [0, 16, 512, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 8672]:
        m = dataclasses.replace(m6, int2_lens=torch.full_like(m6.int2_lens, cut))
        a = decode_attention(q[6:], pool, m, backend="cuda")
        r8 = decode_attention_torch(q[6:], pool, m, compute_dtype=torch.float64, int8_int2_query=True)
        print(f"   row 6 int2 prefix {cut:5d}: cuda vs int8 ref {rel_err(a, r8):.1e}", flush=True)
    _, pool_t, _, _ = tbuild(lens, d=d, hkv=hkv, bs=16, sink=64, recent=256, layout="tile16", device="cuda",
                                       backend="torch", seed=seed, blocks=sum(lens) // 16 * 2 + 64)
    same = all(torch.equal(getattr(pool, f), getattr(pool_t, f)) for f in POOL_TENSORS)
    a = decode_attention(q, pool_t, meta, backend="cuda")
    r8 = decode_attention_torch(q, pool_t, meta, compute_dtype=torch.float64, int8_int2_query=True)
    print(f"   torch-appended pool equal to the CUDA-appended one: {same}; cuda on it vs int8 ref per row "
          f"{[f'{rel_err(a[i:i + 1], r8[i:i + 1]):.1e}' for i in range(len(lens))]}", flush=True)
    print("test case d 64 G 1 seed 65, per row (lens " + str(lens) + "):")
    print(f"   out norm {[round(float(ref[i].norm()), 3) for i in range(len(lens))]}")
    print(f"   q absmax/rms {[round(float(q[i].float().abs().max() / q[i].float().pow(2).mean().sqrt()), 2) for i in range(len(lens))]}")
    for k, v in outs.items():
        e8 = [f"{rel_err(v[i:i + 1], ref8[i:i + 1]):.1e}" for i in range(len(lens))]
        ex = [f"{rel_err(v[i:i + 1], ref[i:i + 1]):.1e}" for i in range(len(lens))]
        print(f"   {k:34s} vs int8 ref {e8}\n   {'':34s} vs exact    {ex}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--contexts", type=lambda s: [int(x) for x in s.split(",") if x], default=[8192, 131072])
    ap.add_argument("--score-std", type=lambda s: [float(x) for x in s.split(",")], default=[1.0, 3.0])
    ap.add_argument("--splits", type=lambda s: [int(x) for x in s.split(",") if x], default=[1, 8, 64])
    ap.add_argument("--same-v", action="store_true")
    ap.add_argument("--v-mean", type=float, default=0.0)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--alt-src", action="append", default=[])
    ap.add_argument("--time-shapes", default="")
    ap.add_argument("--test-case", action="store_true",
                    help="per-row errors of tests/kernels/test_cuda_kernels.py's d 64, G 1 case (seed 65)")
    ap.add_argument("--out", default="diag_decode_precision.json")
    args = ap.parse_args()
    hkv, G, d = args.hkv, args.group, args.head_dim
    if args.test_case:
        test_case(args)
    rows = []
    for i, c in enumerate(cases(args)):
        t0 = time.time()
        pool, meta = build(c["n"], hkv, d, c["v_mean"], c["same_v"], seed=i)
        g = torch.Generator(device="cuda").manual_seed(100 + i)
        q = (torch.randn(1, hkv * G, d, generator=g, device="cuda") * c["score_std"]).bfloat16()
        ref8 = decode_attention_torch(q, pool, meta, compute_dtype=torch.float64, int8_int2_query=True)
        ref = decode_attention_torch(q, pool, meta, compute_dtype=torch.float64)
        outs = {"floor: ref rounded to bf16": ref.bfloat16(), "ref int8 query": ref8}
        for tag, _ in each_source(args.alt_src):
            outs.update({k + tag: v for k, v in cuda_runs(q, pool, meta, args.splits).items()})
        lp = convert_pool(pool, "logical")
        outs["triton"] = decode_attention(q, lp, meta, backend="triton")
        outs["torch fp32"] = decode_attention_torch(q, pool, meta, compute_dtype=torch.float32).bfloat16()
        rec = dict(c, out_absmax=float(ref.abs().max()), out_rms=float(ref.pow(2).mean().sqrt()),
                   runs={k: {"vs_int8_ref": errs(v, ref8), "vs_exact_ref": errs(v, ref)} for k, v in outs.items()},
                   seconds=time.time() - t0)
        rows.append(rec)
        print(f"n={c['n']} score_std={c['score_std']} v_mean={c['v_mean']} same_v={c['same_v']} "
              f"out_absmax={rec['out_absmax']:.4f} out_rms={rec['out_rms']:.5f}", flush=True)
        for k, r in rec["runs"].items():
            print(f"   {k:40s} vs int8 ref fro {r['vs_int8_ref']['fro_rel']:.2e} max {r['vs_int8_ref']['max_rel']:.2e}"
                  f" | vs exact fro {r['vs_exact_ref']['fro_rel']:.2e}", flush=True)
        del pool, lp
        torch.cuda.empty_cache()
    timings = []
    for shape in [s for s in args.time_shapes.split(",") if s]:
        n, batch = (int(x) for x in shape.split("x"))
        pool, meta = build(n, hkv, d, 0.0, False, seed=7, batch=batch)
        q = torch.randn(batch, hkv * G, d, device="cuda").bfloat16()
        rec = {"context": n, "batch": batch, "us": {}}
        for rep in range(2):  # sources interleaved twice: clock / thermal drift shows as a spread
            for _, name in each_source(args.alt_src):
                rec["us"].setdefault(name, []).append(time_call(q, pool, meta))
        print(f"time {n}x{batch}: " + ", ".join(f"{k} {min(v):.1f} us" for k, v in rec["us"].items()), flush=True)
        timings.append(rec)
        del pool
        torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                          "argv": sys.argv, "device": torch.cuda.get_device_name(),
                                          "cases": rows, "timings": timings}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("diag_decode_precision.py needs a CUDA GPU (the kernels under test are CUDA)")
    main()
