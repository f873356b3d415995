"""Model-level decode benchmark (issue 8 item 4): OSCAR's paged INT2 cache vs BF16, whole model.

Run on the GPU machine from the repo root (random bf16 weights: speed does not depend on them):

    PYTHONPATH=src python3 bench/bench_model.py --out $OUT/bench_model.json
    PYTHONPATH=src python3 bench/bench_model.py --smoke          # tiny config on CPU: checks the script

Per model config (bench/configs/qwen3-8b.json, qwen3-4b.json):

* batch 1, ms per generated token at 8K / 32K / 64K / 128K context, for
    - "oscar": OscarCache(method oscar, random orthogonal rotations, sink 64, recent 256, group 128),
      paged backend, R_V folded into o_proj, decode step captured in a CUDA graph by
      ``oscarkv.cache.graph.GraphDecoder``; the host-side block planning of each step is included in
      "step_ms" (a python loop of steps, synchronised), "replay_ms" is the graph alone;
    - "bf16": transformers StaticCache (max_cache_len = context + 1) with an attention function that
      runs torch SDPA over the static buffer, the decode step captured in a CUDA graph the same way;
      each SDPA backend (flash, cuDNN, efficient) is captured and the fastest is reported;
  beside the ideal from bytes: (weights read per step + KV bytes read per step) / copy bandwidth
  (torch copy_ of 2 GiB, read + write bytes, measured in the same run).
* throughput at equal KV memory: a KV budget (default 40 GiB) at 32K context; the largest batch each
  method fits (OSCAR: pool bytes actually allocated per row, incl. the null block and block rounding;
  BF16: the StaticCache's K/V), its graph step time and decode tokens/s.
* KV bytes per token and effective bits per element actually allocated (pools / static buffers).

The caches are filled synthetically (random rotated K/V written through ``write_kv`` with the block
manager's plan for the whole context; random K/V copied into the StaticCache) instead of running a
prefill: the decode step's cost depends on the sizes, not on the values. ``--generate-128k N`` also runs
transformers' ``model.generate`` (a real N-token prefill + 8 decode steps) on the paged cache, first model.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

SMOKE = "--smoke" in sys.argv
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from oscarkv.cache import OscarCache  # noqa: E402
from oscarkv.cache.graph import GraphDecoder, _cache_kwarg, generate  # noqa: E402
from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention  # noqa: E402
from oscarkv.rotation import RotationSet, config_hash  # noqa: E402

SINK, RECENT, GROUP = 64, 256, 128
if SMOKE:
    SINK, RECENT = 16, 16


def log(*a):
    print(*a, flush=True)


def load_config(path):
    from transformers import AutoConfig

    d = json.loads(Path(path).read_text())
    d.pop("_comment", None)
    mt = d.pop("model_type")
    return AutoConfig.for_model(mt, **d)


def tiny_config():
    from transformers import Qwen3Config

    return Qwen3Config(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_hidden_layers=2,
                       intermediate_size=512, vocab_size=1000, max_position_embeddings=4096)


def build_model(cfg, device):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype).eval()
    return model


def random_rotations(cfg, head_dim):
    g = torch.Generator().manual_seed(0)
    n = cfg.num_hidden_layers
    orth = lambda: torch.linalg.qr(torch.randn(n, 1, head_dim, head_dim, generator=g))[0]  # noqa: E731
    return RotationSet(k_rotation=orth(), v_rotation=orth(), k_clip=torch.full((n,), 0.96), v_clip=torch.full((n,), 0.92),
                       meta={"model_id": "random", "config_hash": config_hash(cfg)})


def sync(device):
    if device != "cpu":
        torch.cuda.synchronize()


def copy_bandwidth(device) -> float:
    """Bytes/s of torch copy_ (read + write) on a 2 GiB buffer, median of 20."""
    if device == "cpu":
        return float("nan")
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    del a, b
    return 2 * n / statistics.median(ts)


def weight_bytes_read(model) -> int:
    """Bytes of weights one decode step reads: every parameter, except an untied embedding table
    (the lookup reads one row)."""
    emb = model.get_input_embeddings().weight
    out = model.get_output_embeddings().weight
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    if emb.data_ptr() != out.data_ptr():
        total -= emb.numel() * emb.element_size()
    return total


def dims(cfg):
    from oscarkv.dims import attention_dims

    d = attention_dims(cfg)
    return d.num_layers, d.num_kv_heads, d.head_dim


# ------------------------------------------------------------------ OSCAR (paged)
def fill_paged(cache, batch, context, device, dtype):
    """Synthetic prefill: every row holds ``context`` random rotated tokens in every layer's pool."""
    from oscarkv.kernels import write_kv

    st = cache.paged
    st.allocate(batch, torch.device(device), dtype, context)
    for layer in cache.layers:
        layer.lazy_initialization(torch.empty(batch, 1, 1, 1, device=device, dtype=dtype), None)
    g = torch.Generator(device=device).manual_seed(1)
    _, hkv, d = st.num_kv_heads, st.num_kv_heads, st.head_dim
    k = torch.randn(context, hkv, d, device=device, dtype=dtype, generator=g)
    v = torch.randn(context, hkv, d, device=device, dtype=dtype, generator=g)
    for r in range(batch):
        plan = st.mgr.plan_append([r], [context]).to(device)
        for pool in st.pools:
            write_kv(pool, k, v, plan)
    st.n = context
    cache._padding_known = True
    sync(device)


def paged_bytes(cache, context, batch):
    """Allocated pool bytes, and the KV bytes a decode step reads (held tokens only), summed over layers."""
    st = cache.paged
    alloc = st.nbytes()
    L = len(st.pools)
    hkv, d = st.num_kv_heads, st.head_dim
    p = st.pools[0]
    int2_row = 2 * (d // 4) + 4 * p.num_groups * p.k_scale.element_size()  # K+V codes, K+V scale+zero
    hp_row = 2 * d * p.k_hp.element_size()
    q = cache.method.int2_len(context)
    hp = context - q
    read = L * hkv * batch * (q * int2_row + hp * hp_row)
    return alloc, read


def time_steps(step, n, device):
    sync(device)
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    sync(device)
    return (time.perf_counter() - t0) / n


def replay_ms(graph, n, device, before=None):
    """Median ms of the graph alone (``before``, e.g. resetting a StaticCache's write position, runs
    outside the timed region)."""
    if graph is None or device == "cpu":
        return None
    ts = []
    for _ in range(n):
        if before is not None:
            before()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)


def bench_oscar(model, cfg, rot, context, batch, steps, device):
    dtype = next(model.parameters()).dtype
    cache = OscarCache(cfg, "oscar", rotations=rot, sink=SINK, recent=RECENT, group_size=GROUP,
                       max_tokens=context + steps + 32, backend="paged")
    enable_oscar_attention(model, cache, absorb_v_into_o_proj=True)
    try:
        fill_paged(cache, batch, context, device, dtype)
        dec = GraphDecoder(model, cache, use_graph=device != "cpu")
        tok = torch.ones(batch, dtype=torch.long, device=device)
        for _ in range(3):  # eager warm-up (kernel compilation), capture, one replay
            dec.step(tok)
        step_s = time_steps(lambda: dec.step(tok), steps, device)
        rep = replay_ms(dec.graph, steps, device)
        alloc, read = paged_bytes(cache, context, batch)
        return {"step_ms": step_s * 1e3, "replay_ms": rep, "kv_alloc_bytes": alloc, "kv_read_bytes": read,
                "page": cache.method.page}
    finally:
        disable_oscar_attention(model)
        del cache
        gc.collect()
        if device != "cpu":
            torch.cuda.empty_cache()


def oscar_row_bytes(cfg, rot, context, device):
    """Allocated pool bytes per row at ``context`` (difference of a 2-row and a 1-row allocation)."""
    out = []
    for b in (1, 2):
        c = OscarCache(cfg, "oscar", rotations=rot, sink=SINK, recent=RECENT, group_size=GROUP,
                       max_tokens=context + 64, backend="paged")
        c.paged.allocate(b, torch.device("meta"), torch.bfloat16, context)
        out.append(c.paged.nbytes())
    return out[1] - out[0], out[0]


# ------------------------------------------------------------------ BF16 (StaticCache + SDPA)
BF16_ATTN = "bench_bf16_static_sdpa"


def _bf16_attention(module, query, key, value, attention_mask, scaling=None, **kw):
    import torch.nn.functional as F

    out = F.scaled_dot_product_attention(query, key, value, scale=scaling, enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def bench_bf16(model, cfg, context, batch, steps, device):
    from transformers import AttentionInterface, StaticCache

    AttentionInterface.register(BF16_ATTN, _bf16_attention)
    prev = model.config._attn_implementation
    model.set_attn_implementation(BF16_ATTN)
    L, hkv, d = dims(cfg)
    dtype = next(model.parameters()).dtype
    try:
        cache = StaticCache(config=cfg, max_cache_len=context + 1)
        ids = torch.ones(batch, 1, dtype=torch.long, device=device)
        pos = torch.full((batch, 1), context, dtype=torch.long, device=device)
        ck = {_cache_kwarg(model): cache, "use_cache": True}
        with torch.no_grad():
            model(input_ids=ids, position_ids=pos, **ck)  # lazy init of the buffers
        g = torch.Generator(device=device).manual_seed(2)
        for layer in cache.layers:
            layer.keys.normal_(generator=g)
            layer.values.normal_(generator=g)

        def reset():
            for layer in cache.layers:
                layer.cumulative_length.fill_(context)

        def fwd():
            return model(input_ids=ids, position_ids=pos, **ck).logits

        results = {}
        backends = [None] if device == "cpu" else ["FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"]
        for name in backends:
            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel

                ctx = sdpa_kernel([getattr(SDPBackend, name)]) if name else torch.no_grad()
                with torch.no_grad(), ctx:
                    reset()
                    fwd()
                    if device == "cpu":
                        t = time_steps(lambda: (reset(), fwd()), steps, device)
                        results["default"] = {"step_ms": t * 1e3, "replay_ms": None}
                        continue
                    graph = torch.cuda.CUDAGraph()
                    reset()
                    with torch.cuda.graph(graph):
                        fwd()

                    def step():
                        reset()
                        graph.replay()

                    t = time_steps(step, steps, device)
                    # every replay must start at the same write position (the graph's add_ advances it)
                    results[name] = {"step_ms": t * 1e3, "replay_ms": replay_ms(graph, steps, device, before=reset)}
                    del graph
            except Exception as e:  # a backend that does not support the shape
                results[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        alloc = sum(layer.keys.numel() * layer.keys.element_size() * 2 for layer in cache.layers)
        read = L * hkv * batch * (context + 1) * d * 2 * 2
        ok = {k: v for k, v in results.items() if "step_ms" in v}
        best = min(ok, key=lambda k: ok[k]["step_ms"]) if ok else None
        return {"backends": results, "best": best, "step_ms": ok[best]["step_ms"] if best else None,
                "replay_ms": ok[best]["replay_ms"] if best else None, "kv_alloc_bytes": alloc, "kv_read_bytes": read}
    finally:
        model.set_attn_implementation(prev)
        cache = None
        gc.collect()
        if device != "cpu":
            torch.cuda.empty_cache()


# ------------------------------------------------------------------ main
def run_model(name, cfg, args, device, bw, out):
    log(f"== {name}")
    t0 = time.time()
    model = build_model(cfg, device)
    L, hkv, d = dims(cfg)
    rot = random_rotations(cfg, d)
    wbytes = weight_bytes_read(model)
    rec = {"model": name, "weights_read_bytes": wbytes, "batch1": [], "equal_memory": None}
    log(f"model built in {time.time() - t0:.1f}s; weights read per step {wbytes / 1e9:.2f} GB")
    for ctx in args.contexts:
        row = {"context": ctx}
        for meth, fn in (("oscar", lambda: bench_oscar(model, cfg, rot, ctx, 1, args.steps, device)),
                         ("bf16", lambda: bench_bf16(model, cfg, ctx, 1, args.steps, device))):
            try:
                r = fn()
                r["ideal_ms"] = (wbytes + r["kv_read_bytes"]) / bw * 1e3 if bw == bw else None
                r["kv_bytes_per_token"] = r["kv_alloc_bytes"] / ctx
                r["bits_per_element_allocated"] = 8 * r["kv_alloc_bytes"] / (2 * L * hkv * d * ctx)
                row[meth] = r
            except Exception as e:
                row[meth] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
            log(f"  {ctx:>6} {meth:5s} {json.dumps(row[meth])[:400]}")
        rec["batch1"].append(row)
        out["models"] = [m for m in out["models"] if m["model"] != name] + [rec]
        Path(args.out).write_text(json.dumps(out, indent=1))
    if args.tput_context:
        ctx, budget = args.tput_context, args.kv_budget_gib * 2**30
        per_row_oscar, first_row = oscar_row_bytes(cfg, rot, ctx, device)
        b_oscar = max(1, int((budget - (first_row - per_row_oscar)) // per_row_oscar))
        per_row_bf16 = 2 * L * hkv * (ctx + 1) * d * 2
        b_bf16 = max(1, int(budget // per_row_bf16))
        if args.max_batch:
            b_oscar, b_bf16 = min(b_oscar, args.max_batch), min(b_bf16, args.max_batch)
        eq = {"context": ctx, "kv_budget_bytes": budget, "oscar_bytes_per_row": per_row_oscar, "bf16_bytes_per_row": per_row_bf16}
        for meth, b, fn in (("oscar", b_oscar, lambda b: bench_oscar(model, cfg, rot, ctx, b, args.steps, device)),
                            ("bf16", b_bf16, lambda b: bench_bf16(model, cfg, ctx, b, args.steps, device))):
            try:
                r = fn(b)
                r["batch"] = b
                r["tokens_per_s"] = b / (r["step_ms"] / 1e3)
                eq[meth] = r
            except Exception as e:
                eq[meth] = {"batch": b, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
            log(f"  equal-memory {meth:5s} {json.dumps(eq[meth])[:400]}")
        rec["equal_memory"] = eq
    out["models"] = [m for m in out["models"] if m["model"] != name] + [rec]
    Path(args.out).write_text(json.dumps(out, indent=1))
    if args.generate_128k:
        gen_long(model, cfg, rot, args.generate_128k, device, out, args)
    del model
    gc.collect()
    if device != "cpu":
        torch.cuda.empty_cache()


def gen_long(model, cfg, rot, ctx, device, out, args):
    """``model.generate``: a real prefill of ``ctx`` tokens + 8 decode steps through the paged cache."""
    t0 = time.time()
    try:
        cache = OscarCache(cfg, "oscar", rotations=rot, sink=SINK, recent=RECENT, group_size=GROUP,
                           max_tokens=ctx + 16)
        if device == "cpu":
            cache.use_paged()
        enable_oscar_attention(model, cache, absorb_v_into_o_proj=True)
        ids = torch.randint(1, cfg.vocab_size, (1, ctx), device=device, generator=torch.Generator(device=device).manual_seed(3))
        # the issue's "done when": transformers' own generate on the paged cache at this context
        seqs = model.generate(ids, attention_mask=torch.ones_like(ids), **{_cache_kwarg(model): cache},
                              max_new_tokens=8, do_sample=False, pad_token_id=0)
        toks = seqs[:, ctx:]
        sync(device)
        res = {"context": ctx, "new_tokens": toks.tolist(), "seconds": time.time() - t0, "backend": cache.backend,
               "held_tokens": cache.segments()}
    except Exception as e:
        res = {"context": ctx, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}", "seconds": time.time() - t0}
    finally:
        disable_oscar_attention(model)
    log(f"  generate at {ctx}: {json.dumps(res)[:400]}")
    out["generate_long"] = res
    Path(args.out).write_text(json.dumps(out, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="qwen3-8b,qwen3-4b")
    ap.add_argument("--contexts", default="8192,32768,65536,131072")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--tput-context", type=int, default=32768)
    ap.add_argument("--kv-budget-gib", type=float, default=40.0)
    ap.add_argument("--max-batch", type=int, default=0)
    ap.add_argument("--generate-128k", type=int, default=0, help="context of a real generate run (0: skip)")
    ap.add_argument("--out", default="bench_model.json")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    args.contexts = [int(x) for x in args.contexts.split(",") if x]
    device = "cpu" if args.smoke else "cuda"
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv, "models": [],
           "torch": torch.__version__}
    try:
        import transformers

        out["transformers"] = transformers.__version__
        out["commit"] = os.popen(f"git -C {ROOT} rev-parse --short HEAD 2>/dev/null").read().strip()
        if device == "cuda":
            out["device"] = torch.cuda.get_device_name()
    except Exception:
        pass
    bw = copy_bandwidth(device)
    out["copy_bandwidth_bytes_per_s"] = bw
    log(f"copy bandwidth {bw / 1e12:.3f} TB/s")
    if args.smoke:
        run_model("tiny", tiny_config(), args, device, bw, out)
    else:
        for name in args.models.split(","):
            run_model(name, load_config(ROOT / "bench" / "configs" / f"{name}.json"), args, device, bw, out)
            args.generate_128k = 0  # the long generate runs on the first model only
    Path(args.out).write_text(json.dumps(out, indent=1))
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
