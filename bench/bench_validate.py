"""Does input validation slow the decode hot path? (issue 11 item 6)

Times, in one process, each decode-step operation twice: with the package's checks as shipped ("on") and
with every check function of the hot path replaced by a no-op ("off" = the code before the checks; the
checks live in functions of their own exactly so that this comparison is possible):

    cache_step     OscarCache (method oscar): one decode token through every layer's ``update``
                   (guarded by ``validation.snapshot_layer`` / ``restore_layer``)
    paged_step     CUDA only: one eager decode step (model forward) of a random 4-layer Llama (8 KV heads,
                   head_dim 128) through the paged OscarCache backend and the CUDA kernels, guarded by
                   ``PagedState.check_consistent`` / ``end_forward`` (the half-written-forward check)
    plan_meta      MixedKVCache.plan_append + metadata for a batch of sequences, one token each
                   (host-side ownership / bounds checks of ``kernels/checks.py`` when present)
    decode_attn    decode_attention over the paged pools (torch backend on CPU, triton on CUDA),
                   default ``validate`` setting (device-side table checks are opt-in, so off)

    python bench/bench_validate.py [--device cpu|cuda] [--src PATH] [--reps N]

``--src`` puts another checkout's ``src`` first on the path (e.g. main's, for a before/after of two commits).
Prints one JSON line per measurement: median seconds over ``--reps`` repetitions, on/off ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _timer(device):
    import torch

    def now():
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    return now


def _median(fn, reps, now, inner=1):
    """Minimum over ``reps`` (the least-disturbed run: this machine is shared; the median is noisier)."""
    out = []
    for _ in range(reps):
        t = now()
        for _ in range(inner):
            fn()
        out.append((now() - t) / inner)
    return min(out)


def _checks_only(fn, n=2000):
    """Seconds per call of a check function alone (what the checks add, free of the step's noise)."""
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


class _ChecksOff:
    """Context manager: every hot-path check function replaced by a no-op."""

    def __enter__(self):
        import importlib

        self.saved = []
        targets = [("oscarkv.validation", "snapshot_layer", lambda layer: None),
                   ("oscarkv.validation", "restore_layer", lambda layer, snap: None),
                   ("oscarkv.cache.oscar_cache", "snapshot_layer", lambda layer: None),
                   ("oscarkv.cache.oscar_cache", "restore_layer", lambda layer, snap: None)]
        try:
            checks = importlib.import_module("oscarkv.kernels.checks")
            targets += [("oscarkv.kernels.checks", n, lambda *a, **k: None) for n in getattr(checks, "HOT_PATH", ())]
            for mod in ("oscarkv.kernels.paged", "oscarkv.kernels"):
                m = importlib.import_module(mod)
                targets += [(mod, n, lambda *a, **k: None) for n in getattr(checks, "HOT_PATH", ()) if hasattr(m, n)]
        except ImportError:
            pass
        for mod, name, fn in targets:
            try:
                m = importlib.import_module(mod)
            except ImportError:
                continue
            if hasattr(m, name):
                self.saved.append((m, name, getattr(m, name)))
                setattr(m, name, fn)
        return self

    def __exit__(self, *exc):
        for m, name, fn in reversed(self.saved):
            setattr(m, name, fn)


def bench_cache_step(device, reps, context):
    import torch
    from transformers import LlamaConfig

    from oscarkv.cache import OscarCache
    from oscarkv.rotation import RotationSet

    # SmolLM2-135M's attention shape: 30 layers, 3 KV heads, head_dim 64
    cfg = LlamaConfig(hidden_size=576, num_attention_heads=9, num_key_value_heads=3, head_dim=64,
                      num_hidden_layers=30, intermediate_size=64, vocab_size=100)
    g = torch.Generator().manual_seed(0)
    orth = lambda: torch.linalg.qr(torch.randn(30, 1, 64, 64, generator=g))[0]  # noqa: E731
    rot = RotationSet(orth(), orth(), k_clip=torch.full((30,), 0.96), v_clip=torch.full((30,), 0.92))
    dt = torch.bfloat16 if device == "cuda" else torch.float32

    def fresh():
        c = OscarCache(cfg, "oscar", rotations=rot, sink=64, recent=256, group_size=64)
        k = torch.randn(1, 3, context, 64, device=device, dtype=dt)
        for i in range(30):
            c.update(k, k, i)
        return c

    step = torch.randn(1, 3, 1, 64, device=device, dtype=dt)
    now = _timer(device)
    res = {}
    for mode in MODES:  # interleaved against drift
        with (_ChecksOff() if mode.startswith("off") else _Null()):
            c = fresh()

            def one():
                for i in range(30):
                    c.update(step, step, i)

            one()
            res[mode] = _median(one, reps, now)
    out = {"op": "cache_step", "context": context, "layers": 30, **_summ(res)}
    try:  # what the checks cost alone, per decode step (30 layers)
        from oscarkv.validation import check_update_args, snapshot_layer

        def checks():
            for i in range(30):
                check_update_args(step, step, i, 30, 3, 64)
                snapshot_layer(c.layers[i])

        out["checks_alone_s"] = _checks_only(checks, 300)
        out["checks_share_of_step"] = out["checks_alone_s"] / out["off_s"]
    except ImportError:
        pass
    return out


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


MODES = ("on", "off", "on2", "off2", "on3", "off3")


def _summ(res):
    on = min(v for k, v in res.items() if k.startswith("on"))
    off = min(v for k, v in res.items() if k.startswith("off"))
    return {"on_s": on, "off_s": off, "on_over_off": on / off}


def bench_paged(device, reps, batch, context):
    import torch

    from oscarkv.kernels import MixedKVCache, MixedKVPool, decode_attention, write_kv
    from oscarkv.quant import QuantConfig

    bs, hkv, hq, d = 16, 8, 32, 128  # Qwen3-8B attention shape
    blocks_per_seq = context // bs + 4
    nblk = batch * blocks_per_seq + 8
    pool = MixedKVPool.allocate(nblk, batch * 24 + 8, bs, hkv, d, QuantConfig(group_size=d, clip_ratio=0.96),
                                QuantConfig(group_size=d, clip_ratio=0.92), device=device)
    now = _timer(device)
    out = []
    res_pm, res_at = {}, {}
    for mode in MODES:
        with (_ChecksOff() if mode.startswith("off") else _Null()):
            cache = MixedKVCache(nblk, batch * 24 + 8, bs, sink=64, recent=256)
            ids = list(range(batch))
            for i in ids:
                cache.add(i)
            kv = torch.randn(batch * context, hkv, d, device=device).bfloat16()
            write_kv(pool, kv, kv, cache.plan_append(ids, [context] * batch))
            q = torch.randn(batch, hq, d, device=device).bfloat16()
            meta = cache.metadata(ids, device=device)

            def pm():
                cache.plan_append(ids, [1] * batch)
                cache.metadata(ids, device=device)

            res_pm[mode] = _median(pm, reps, now)
            attn_reps = reps if device == "cuda" else max(5, reps // 3)
            res_at[mode] = _median(lambda: decode_attention(q, pool, meta), attn_reps, now)
    pm_out = {"op": "plan_meta", "batch": batch, **_summ(res_pm)}
    try:
        from oscarkv.kernels.checks import check_append_request, check_known

        def checks():
            check_append_request(cache, ids, [1] * batch)
            check_known(cache, ids)

        pm_out["checks_alone_s"] = _checks_only(checks)
        pm_out["checks_share_of_step"] = pm_out["checks_alone_s"] / pm_out["off_s"]
    except ImportError:
        pass
    out.append(pm_out)
    out.append({"op": "decode_attn", "batch": batch, "context": context,
                "backend": "triton" if device == "cuda" else "torch", **_summ(res_at)})
    return out


def bench_paged_step(reps, context, device="cuda"):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from oscarkv.cache import OscarCache
    from oscarkv.cache.graph import _cache_kwarg
    from oscarkv.cache.paged import PagedState
    from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention
    from oscarkv.rotation import RotationSet, config_hash

    cfg = LlamaConfig(hidden_size=1024, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                      num_hidden_layers=4, intermediate_size=2048, vocab_size=512,
                      max_position_embeddings=context + 64)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16 if device == "cuda" else torch.float32).eval()
    g = torch.Generator().manual_seed(0)
    orth = lambda: torch.linalg.qr(torch.randn(4, 1, 128, 128, generator=g))[0]  # noqa: E731
    rot = RotationSet(orth(), orth(), k_clip=torch.full((4,), 0.96), v_clip=torch.full((4,), 0.92),
                      meta={"model_id": "random", "config_hash": config_hash(cfg)})
    ids = torch.randint(1, 512, (1, context), device=device)
    now = _timer(device)
    ck = _cache_kwarg(model)
    res = {}
    saved = PagedState.check_consistent, PagedState.end_forward
    for mode in MODES:
        if mode.startswith("off"):
            PagedState.check_consistent = PagedState.end_forward = lambda self: None
        try:
            cache = OscarCache(cfg, "oscar", rotations=rot, max_tokens=context + 64 * len(MODES) * (reps + 2),
                               sink=64, recent=256, group_size=128)
            if device == "cpu":
                cache.use_paged()  # (smoke runs; CUDA picks the paged backend by itself)
            enable_oscar_attention(model, cache)
            with torch.no_grad():
                model(ids, **{ck: cache}, use_cache=True)
                tok = ids[:, -1:]

                def one():
                    model(tok, **{ck: cache}, use_cache=True)

                one()
                res[mode] = _median(one, reps, now)
        finally:
            disable_oscar_attention(model)
            PagedState.check_consistent, PagedState.end_forward = saved
    return {"op": "paged_step", "context": context, "layers": 4, "backend": cache.backend, **_summ(res)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--src", help="put this src folder first on sys.path")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (1: least disturbed on a shared machine)")
    a = ap.parse_args(argv)
    if a.src:
        sys.path.insert(0, str(Path(a.src).resolve()))
    import torch

    import oscarkv

    if a.device == "cpu":
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    info = {"src": str(Path(oscarkv.__file__).parent), "device": a.device, "threads": torch.get_num_threads()}
    print(json.dumps({"info": info}))
    print(json.dumps(bench_cache_step(a.device, a.reps, a.context)), flush=True)
    for r in bench_paged(a.device, a.reps, a.batch, a.context):
        print(json.dumps(r), flush=True)
    if a.device == "cuda":
        print(json.dumps(bench_paged_step(a.reps, a.context)), flush=True)


if __name__ == "__main__":
    main()
