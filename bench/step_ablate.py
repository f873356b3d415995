"""Where a decode step's wall time goes (issue 8): graph replay time of the compiled decode step with parts of
it switched off, OSCAR and BF16 in one process. Kernel times under a profiler overlap (PDL starts the append
and the decode kernel early), so the marginal cost of a part is measured here as the replay time it adds.

    PYTHONPATH=src python3 bench/step_ablate.py --model qwen3-8b --context 131072 --out $OUT/ablate.json
    PYTHONPATH=src python3 bench/step_ablate.py --smoke       # tiny config on CPU: checks the script

OSCAR variants (one paged cache, the graph re-captured per variant; skipped parts give wrong numbers, only the
time matters): ``full``; ``no_append`` (write_kv does nothing: with R_K fused into the append, the step's q / k
rotation goes with it, and the queries are only copied into the rotated-query buffer, one copy kernel per layer, so
that the decode kernel reads defined values); ``no_decode`` (the decode kernel does not run); ``no_kv``
(neither). BF16 variants (compiled like bench_model.py): ``full``, the fastest of
``--bf16-backends`` (cuDNN SDPA over a StaticCache and FlashInfer's paged decode by default, each in
``full_backends``), and ``no_attention`` (SDPA's attention function returns zeros, another compilation; the
compiler then drops what only feeds the queries, their norm and rotary embedding (and with unfused projections the
q GEMM; seen on CPU in inductor's code for a toy step, thirty-first session), so this step is a little faster than
BF16's real shared part and ``bound`` is an upper bound). Also
``steps_ms``: real decode steps (one token each, a page demoted every 8), per OSCAR variant. On the GPU also
``bound`` (issue 8): the ideal speedup from bytes and the best one this model allows (BF16 without attention +
OSCAR's KV bytes at copy bandwidth).

``--equal-memory`` (issue 8's throughput at equal KV memory, e.g. ``--context 32768 --equal-memory``): OSCAR's
variants at the largest batch its pools fit in ``--kv-budget-gib`` (bench_model's rule), BF16 ``full`` at the
largest batch its StaticCache fits, and BF16 ``no_attention`` at OSCAR's batch over a short StaticCache
(``--short-context``; with the attention off a step does not read the context: the 32K cache of that batch would
not fit). ``bound`` is then in tokens/s: BF16's measured, OSCAR's measured, the best OSCAR step this leaves (BF16's
step without attention at OSCAR's batch + OSCAR's KV bytes at copy bandwidth), and the share of copy bandwidth
OSCAR's KV part must reach for a given ratio (``--target-ratio``, default 6).

    PYTHONPATH=src python3 bench/step_ablate.py --model qwen3-8b --context 32768 --equal-memory --out $OUT/eq.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import bench_model as bm  # noqa: E402
import oscarkv.kernels as K  # noqa: E402


def oscar_variants(model, cfg, rot, args, device) -> tuple[dict, int]:
    real_write, real_decode = K.write_kv, K.decode_attention

    def skip_write(*a, q=None, q_out=None, **k):
        if q_out is not None:  # the fused-rotation append also writes the rotated queries: keep them defined
            q_out.copy_(q)
    skip_decode = lambda q, *a, out=None, **k: out  # noqa: E731
    variants = {"full": (real_write, real_decode), "no_append": (skip_write, real_decode),
                "no_decode": (real_write, skip_decode), "no_kv": (skip_write, skip_decode)}
    res = {}
    with bm.oscar_session(model, cfg, rot, args.context, args.batch, 64, device, compile=True) as s:
        dec, tok = s["dec"], torch.ones(args.batch, dtype=torch.long, device=device)
        kv_read = bm.paged_bytes(s["cache"], args.context, args.batch)[1]
        try:
            for name, (w, d) in variants.items():
                K.write_kv, K.decode_attention = w, d  # PagedState.decode_layer imports them at call time
                dec.reset_graphs()
                dec.step(tok)  # re-capture with this variant
                r = {"replay_ms": bm.replay_ms(dec.graph, args.replays, device),
                     "steps_ms": bm.time_steps(lambda: dec.step(tok), 8, device) * 1e3}
                res[name] = r
                bm.log(f"oscar {name:10s} {json.dumps(r)}")
        finally:
            K.write_kv, K.decode_attention = real_write, real_decode
    return res, kv_read


def bound(out: dict, model, cfg, args) -> dict:
    """Issue 8's batch-1 target against what the model allows: the ideal speedup from bytes at copy bandwidth,
    and the fastest OSCAR step this measurement leaves, the BF16 step without attention (what both methods run)
    plus OSCAR's KV bytes at copy bandwidth and nothing else (no append, no tile math, no per-layer overhead)."""
    bw, w = out["copy_bandwidth_Bps"], bm.weight_bytes_read(model)
    kv_bf16 = bm.bf16_kv_read_bytes(cfg, args.context, args.batch)
    ideal = (w + kv_bf16) / (w + out["kv_read_bytes"])
    fastest_ms = out["bf16"]["no_attention"]["replay_ms"] + out["kv_read_bytes"] / bw * 1e3
    best = out["bf16"]["full"]["replay_ms"] / fastest_ms
    return {"ideal_speedup": ideal, "fastest_oscar_step_ms": fastest_ms, "best_speedup": best,
            "best_share_of_ideal": best / ideal,
            "measured_share_of_ideal": out["bf16"]["full"]["replay_ms"] / out["oscar"]["full"]["replay_ms"] / ideal}


def _zero_attention(module, query, key, value, attention_mask, scaling=None, **kw):
    return query.new_zeros(query.shape[0], query.shape[2], query.shape[1], query.shape[3]), None


def _bf16_replay(model, cfg, args, device, context, batch, backend) -> float:
    """Replay ms of BF16's compiled step under ``backend`` (an SDPA backend name, "default", or one of
    bench_model's paged decodes: "FLASHINFER", "PAGED_TORCH")."""
    torch._dynamo.reset()  # a new attention function: a new compilation
    session, sdpa = bm.bf16_backend_session(model, cfg, context, batch, device, True,
                                            None if backend == "default" else backend)
    with session as s:
        graph, step = bm.capture_bf16(s, device, True, sdpa)
        return bm.replay_ms(graph, args.replays, device, before=s["reset"])


def bf16_variants(model, cfg, args, device, shapes: dict) -> dict:
    """BF16 step replay ms per variant; ``shapes``: variant ("full" / "no_attention") -> (context, batch).
    ``full`` is the fastest of ``args.bf16_backends`` (each in ``full_backends``); ``no_attention`` runs the
    first SDPA one (the attention function returns zeros: the backend does not matter)."""
    res = {}
    for name, (context, batch) in shapes.items():
        keep = bm._bf16_attention
        if name == "no_attention":
            bm._bf16_attention = _zero_attention  # registered by bf16_session under bm.BF16_ATTN
        try:
            if name == "full":
                per = {}
                for be in args.bf16_backends:
                    try:
                        per[be] = _bf16_replay(model, cfg, args, device, context, batch, be)
                    except Exception as e:  # FlashInfer missing, or a backend without a kernel for the shape
                        per[be] = bm.error_text(e, 200)
                    bm.log(f"bf16  full/{be:16s} {per[be]}")
                ok = {k: v for k, v in per.items() if not isinstance(v, str)}
                if not ok:
                    raise RuntimeError(f"no BF16 backend ran: {per}")
                best = min(ok, key=lambda k: float("inf") if ok[k] is None else ok[k])  # None: CPU, no graph
                r = {"replay_ms": ok[best], "backend": best, "full_backends": per}
            else:
                sdpa = next((b for b in args.bf16_backends if b not in bm.PAGED_BF16_DECODES), "default")
                r = {"replay_ms": _bf16_replay(model, cfg, args, device, context, batch, sdpa)}
            res[name] = {**r, "context": context, "batch": batch}
            bm.log(f"bf16  {name:10s} {json.dumps(res[name])}")
        finally:
            bm._bf16_attention = keep
    return res


def equal_memory_bound(out: dict, args) -> dict:
    """Issue 8's ratio of decode tokens/s at equal KV memory, measured and at best: OSCAR's step can be no faster
    than BF16's step without attention at OSCAR's batch plus OSCAR's KV bytes at copy bandwidth. Also the share of
    copy bandwidth OSCAR's KV part (everything the step adds over BF16's step without attention) must reach for
    ``args.target_ratio``."""
    bw, kv = out["copy_bandwidth_Bps"], out["kv_read_bytes"]
    b_o, b_b = out["equal_memory"]["oscar_batch"], out["equal_memory"]["bf16_batch"]
    shared_ms = out["bf16"]["no_attention"]["replay_ms"]
    bf16_tps = b_b / out["bf16"]["full"]["replay_ms"] * 1e3
    oscar_tps = b_o / out["oscar"]["full"]["replay_ms"] * 1e3
    best_tps = b_o / (shared_ms + kv / bw * 1e3) * 1e3
    budget_ms = b_o / (args.target_ratio * bf16_tps) * 1e3 - shared_ms  # OSCAR's KV part for the target
    return {"bf16_tokens_per_s": bf16_tps, "oscar_tokens_per_s": oscar_tps, "measured_ratio": oscar_tps / bf16_tps,
            "best_oscar_tokens_per_s": best_tps, "best_ratio": best_tps / bf16_tps,
            "oscar_kv_part_ms": out["oscar"]["full"]["replay_ms"] - shared_ms,
            "kv_part_ms_for_target": budget_ms, "target_ratio": args.target_ratio,
            "copy_share_needed_for_target": (kv / bw * 1e3) / budget_ms if budget_ms > 0 else float("inf")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--context", type=int, default=131072)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--replays", type=int, default=50)
    ap.add_argument("--no-fuse-projections", action="store_true")
    ap.add_argument("--equal-memory", action="store_true", help="batches from the KV budget (see the docstring)")
    ap.add_argument("--kv-budget-gib", type=float, default=40.0)
    ap.add_argument("--max-batch", type=int, default=0)
    ap.add_argument("--short-context", type=int, default=1024, help="StaticCache length of BF16 without attention")
    ap.add_argument("--target-ratio", type=float, default=6.0)
    ap.add_argument("--bf16-backends", default="CUDNN_ATTENTION,FLASHINFER",
                    help="BF16 full step: the fastest of these (SDPA backend names, default, FLASHINFER, PAGED_TORCH)")
    ap.add_argument("--out", default="step_ablate.json")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    args.bf16_backends = [b for b in args.bf16_backends.split(",") if b]
    if args.smoke and "--bf16-backends" not in sys.argv:
        args.bf16_backends = ["default"]
    device, cfg, model, rot = bm.setup(args.model, args.smoke, not args.no_fuse_projections)
    if args.smoke:
        args.context, args.replays = min(args.context, 256), 2
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv, "torch": torch.__version__,
           "model": "tiny" if args.smoke else args.model, "context": args.context, "batch": args.batch,
           "copy_bandwidth_Bps": bm.copy_bandwidth(device)}
    shapes = {"full": (args.context, args.batch), "no_attention": (args.context, args.batch)}
    if args.equal_memory:
        eq = bm.equal_memory_batches(cfg, rot, args.context, args.kv_budget_gib * 2**30, args.max_batch)
        out["equal_memory"] = eq
        args.batch = out["batch"] = eq["oscar_batch"]
        shapes = {"full": (args.context, eq["bf16_batch"]), "no_attention": (min(args.short_context, args.context), args.batch)}
        bm.log(f"equal memory: OSCAR batch {args.batch}, BF16 batch {eq['bf16_batch']} at {args.context} tokens")
    out["oscar"], out["kv_read_bytes"] = oscar_variants(model, cfg, rot, args, device)
    Path(args.out).write_text(json.dumps(out, indent=1))
    out["bf16"] = bf16_variants(model, cfg, args, device, shapes)
    Path(args.out).write_text(json.dumps(out, indent=1))
    o, b = out["oscar"], out["bf16"]
    if device != "cpu":
        bm.log(f"OSCAR: append {o['full']['replay_ms'] - o['no_append']['replay_ms']:.3f} ms, decode "
               f"{o['full']['replay_ms'] - o['no_decode']['replay_ms']:.3f} ms, both {o['full']['replay_ms'] - o['no_kv']['replay_ms']:.3f} ms; "
               f"rest {o['no_kv']['replay_ms']:.3f} ms vs BF16 without attention {b['no_attention']['replay_ms']:.3f} ms"
               + ("" if args.equal_memory else f"; BF16 attention {b['full']['replay_ms'] - b['no_attention']['replay_ms']:.3f} ms"))
        out["bound"] = equal_memory_bound(out, args) if args.equal_memory else bound(out, model, cfg, args)
        Path(args.out).write_text(json.dumps(out, indent=1))
        bm.log(f"BOUND: {json.dumps({k: round(v, 4) for k, v in out['bound'].items()})}")
    bm.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
