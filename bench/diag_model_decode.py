"""Issue 8's 128K check, layer by layer: which kernel moves the paged CUDA path away from the references?

Sixteenth session (BENCHMARKS.md): on the random-weight Qwen3-8B at 131,072 tokens the paged cache on its CUDA
kernels is 14.7-16.5% (max |logit difference| / max |logit|) from every reference, while the same cache on its
Triton or torch kernels is 4-6% from the exact reference (as close as the references are to each other). This
script runs ``model.generate`` on the paged cache (the CUDA kernels where the device has them) and checks every
kernel call of the run against the torch reference on the same inputs:

* every ``write_kv`` (the prefill's and each step's append): the same write on a copy of the pool with the torch
  backend; reports the fraction of INT2 code bytes that differ and the largest scale / zero / BF16-row difference;
* every ``decode_attention``: the float64 torch reference on the same pool and query, with the kernel's int8
  query (``int8_int2_query=True``, what the GPU tests compare against) and with the exact query.

    PYTHONPATH=src python3 bench/diag_model_decode.py --model qwen3-8b --context 131072 --out $OUT/diag.json
    PYTHONPATH=src python3 bench/diag_model_decode.py --smoke       # tiny config on CPU: checks the script
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
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import bench_model as bm  # noqa: E402
from diag_decode_precision import errs  # noqa: E402
import oscarkv.kernels as K  # noqa: E402
from oscarkv.cache import OscarCache  # noqa: E402
from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention  # noqa: E402
from oscarkv.kernels.paged import POOL_TENSORS as FIELDS  # noqa: E402
from oscarkv.kernels.reference import decode_attention_torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--context", type=int, default=131072)
    ap.add_argument("--new-tokens", type=int, default=3)
    ap.add_argument("--out", default="diag_model_decode.json")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    device, cfg, model, rot = bm.setup(args.model, args.smoke)
    if args.smoke:
        args.context = min(args.context, 300)
    ids = torch.randint(1, cfg.vocab_size, (1, args.context), device=device,
                        generator=torch.Generator(device=device).manual_seed(3))  # gen_long's prompt
    rows: list = []
    real_write, real_decode = K.write_kv, K.decode_attention

    def write_kv(pool, k, v, plan, *, backend="auto", **kw):
        shadow = dataclasses.replace(pool, **{f: getattr(pool, f).clone() for f in FIELDS})
        kw2 = dict(kw, q_out=torch.empty_like(kw["q_out"])) if kw.get("q_out") is not None else kw  # fused rotation
        real_write(shadow, k, v, plan, backend="torch", **kw2)
        real_write(pool, k, v, plan, backend=backend, **kw)
        r = {"call": "write_kv", "rows": int(k.shape[0])}
        if kw.get("q_out") is not None:
            r["q_out_max_abs"] = float((kw["q_out"].float() - kw2["q_out"].float()).abs().max())
        for f in FIELDS:
            a, b = getattr(pool, f), getattr(shadow, f)
            if a.dtype == torch.uint8:
                r[f + "_bytes_differing"] = float((a != b).double().mean())
            else:
                r[f + "_max_abs"] = float((a.float() - b.float()).abs().max())
        rows.append(r)

    def decode_attention(q, pool, meta, **kw):
        out = real_decode(q, pool, meta, **kw)
        sc = kw.get("sm_scale")
        ref8 = decode_attention_torch(q, pool, meta, sm_scale=sc, compute_dtype=torch.float64, int8_int2_query=True)
        ref = decode_attention_torch(q, pool, meta, sm_scale=sc, compute_dtype=torch.float64)
        qa = q.float().abs()
        rows.append({"call": "decode", "vs_int8_query_ref": errs(out, ref8), "vs_exact_ref": errs(out, ref),
                     "int8_ref_vs_exact_ref": errs(ref8, ref), "q_absmax": float(qa.max()),
                     "q_absmax_over_rms": float((qa.amax(-1) / q.float().pow(2).mean(-1).sqrt()).max()),
                     "out_absmax": float(out.float().abs().max())})
        return out

    cache = OscarCache(cfg, "oscar", rotations=rot, sink=bm.SINK, recent=bm.RECENT, group_size=bm.GROUP,
                       max_tokens=args.context + args.new_tokens + 16)
    if device == "cpu":
        cache.use_paged()
    enable_oscar_attention(model, cache, absorb_v_into_o_proj=False)
    K.write_kv, K.decode_attention = write_kv, decode_attention  # PagedState imports them at call time
    t0 = time.time()
    try:
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), **{bm._cache_kwarg(model): cache},
                           max_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0)
    finally:
        K.write_kv, K.decode_attention = real_write, real_decode
        disable_oscar_attention(model)
    dec = [r for r in rows if r["call"] == "decode"]
    wr = [r for r in rows if r["call"] == "write_kv"]
    summary = {"seconds": time.time() - t0, "decode_calls": len(dec), "write_calls": len(wr),
               "kernel_backend": cache.paged.kernel_backend, "layout": cache.paged.layout}
    for key in ("vs_int8_query_ref", "vs_exact_ref", "int8_ref_vs_exact_ref"):
        for m in ("max_rel", "fro_rel"):
            summary[f"decode {key} {m} (max over calls)"] = max(r[key][m] for r in dec) if dec else None
    for f in FIELDS:
        k = f + ("_bytes_differing" if f.endswith("codes") else "_max_abs")
        summary[f"write {k} (max over calls)"] = max(r[k] for r in wr) if wr else None
    bm.log(json.dumps(summary, indent=1))
    worst = sorted(range(len(dec)), key=lambda i: -dec[i]["vs_int8_query_ref"]["max_rel"])[:5]
    for i in worst:
        bm.log(f"decode call {i} (layer {i % cfg.num_hidden_layers}): {json.dumps(dec[i])}")
    Path(args.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                          "argv": sys.argv, "summary": summary, "calls": rows}, indent=1))
    bm.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
