"""Model-level decode benchmark (issue 8 item 4): OSCAR's paged INT2 cache vs BF16, whole model.

Run on the GPU machine from the repo root (random bf16 weights: speed does not depend on them):

    PYTHONPATH=src python3 bench/bench_model.py --out $OUT/bench_model.json
    PYTHONPATH=src python3 bench/bench_model.py --smoke          # tiny config on CPU: checks the script

Per model config (bench/configs/qwen3-8b.json, qwen3-4b.json):

* batch 1, ms per generated token at 8K / 32K / 64K / 128K context, for
    - "oscar": OscarCache(method oscar, or oscar+log8 with ``--scale-dtype log8``, random orthogonal rotations, sink
      64, recent 256, group 128),
      paged backend, R_V folded into o_proj, decode step captured in a CUDA graph by
      ``oscarkv.cache.graph.GraphDecoder``; the host-side block planning of each step is included in
      "step_ms" (a python loop of steps, synchronised), "replay_ms" is the graph alone;
    - "bf16": transformers StaticCache (max_cache_len = context + 1) with an attention function that
      runs torch SDPA over the static buffer, the decode step captured in a CUDA graph the same way;
      each SDPA backend (flash, cuDNN, efficient) is captured, and FlashInfer's paged BF16 decode in the
      same loop (``paged_bf16_session``: page-64 pools, the step's K/V written into them, one planned
      ``BatchDecodeWithPagedKVCacheWrapper`` for all layers); the fastest is reported;
  with ``--modes compiled`` also "oscar_compiled" / "bf16_compiled": the same steps ``torch.compile``d
  first (``oscarkv.cache.graph.compiled_forward``: one compilation of ``model.forward`` shared by both
  paths; OSCAR's append + attention is the opaque op ``oscarkv::paged_decode``), then captured the same
  way (BF16 with the backends of ``--compiled-bf16-backends``, cuDNN SDPA and FlashInfer by default: each
  costs a compilation);
  beside the ideal from bytes: (weights read per step + KV bytes read per step) / copy bandwidth
  (torch copy_ of 2 GiB, read + write bytes, measured in the same run).
* throughput at equal KV memory: a KV budget (default 40 GiB) at 32K context; the largest batch each
  method fits (OSCAR: pool bytes actually allocated per row, incl. the null block and block rounding;
  BF16: the StaticCache's K/V), its graph step time and decode tokens/s.
* KV bytes per token and effective bits per element actually allocated (pools / static buffers).

``--fuse-projections`` runs every variant on the model with q/k/v_proj and gate/up_proj fused into one
GEMM each (``oscarkv.integrations.transformers.fuse_projections``).

The caches are filled synthetically (random rotated K/V written through ``write_kv`` with the block
manager's plan for the whole context; random K/V copied into the StaticCache) instead of running a
prefill: the decode step's cost depends on the sizes, not on the values. ``--generate-128k N`` also runs
transformers' ``model.generate`` (a real N-token prefill + 8 decode steps) on the paged cache, first model.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch

SMOKE = "--smoke" in sys.argv
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from oscarkv.cache import OscarCache  # noqa: E402
from oscarkv.cache.graph import GraphDecoder, _cache_kwarg, compiled_forward  # noqa: E402
from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention  # noqa: E402
from oscarkv.fileio import source_commit  # noqa: E402
from oscarkv.rotation import RotationSet, config_hash  # noqa: E402

SINK, RECENT, GROUP = 64, 256, 128
OSCAR = "oscar"  # the measured method: "oscar+log8" with --scale-dtype log8 (records of 8 d + 64 bytes, not 8 d + 128)
if SMOKE:
    SINK, RECENT = 16, 16


def log(*a):
    print(*a, flush=True)


def error_text(e: BaseException, n: int = 300) -> str:
    """One line for a run that failed (a backend without a kernel for the shape, a missing package): the
    exception's type and the first ``n`` characters of its first line."""
    first = (str(e).splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:n]}"


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


def setup(name: str, smoke: bool, fuse: bool = False):
    """(device, config, model, rotations) of a bench script: ``smoke``: the tiny config on CPU; else
    bench/configs/<name>.json on CUDA with random bf16 weights; ``fuse``: q/k/v and gate/up as one GEMM each."""
    device = "cpu" if smoke else "cuda"
    cfg = tiny_config() if smoke else load_config(ROOT / "bench" / "configs" / f"{name}.json")
    model = build_model(cfg, device)
    if fuse:
        from oscarkv.integrations.transformers import fuse_projections

        fuse_projections(model)
    return device, cfg, model, random_rotations(cfg, dims(cfg)[2])


def random_rotations(cfg, head_dim):
    g = torch.Generator().manual_seed(0)
    n = cfg.num_hidden_layers
    orth = lambda: torch.linalg.qr(torch.randn(n, 1, head_dim, head_dim, generator=g))[0]  # noqa: E731
    top = lambda: torch.full((n,), 2.0)  # noqa: E731 (log8's scale_top, as bench_decode's pools: 2^(2 - e/32))
    return RotationSet(k_rotation=orth(), v_rotation=orth(), k_clip=torch.full((n,), 0.96), v_clip=torch.full((n,), 0.92),
                       k_scale_top=top(), v_scale_top=top(), meta={"model_id": "random", "config_hash": config_hash(cfg)})


def sync(device):
    if device != "cpu":
        torch.cuda.synchronize()


def copy_bandwidth(device) -> float:
    """Bytes/s of a device-to-device copy (read + write): bench_decode's measurement, the one rule every
    benchmark's "percent of copy bandwidth" and ideal-from-bytes use. NaN on CPU."""
    if device == "cpu":
        return float("nan")
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_decode import copy_bandwidth as measure

    return measure(device)[0]


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


def bf16_kv_read_bytes(cfg, context, batch):
    """The KV bytes a BF16 decode step reads: K and V of the context and the new token, every layer."""
    L, hkv, d = dims(cfg)
    return L * hkv * batch * (context + 1) * d * 2 * 2


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


@contextlib.contextmanager
def oscar_session(model, cfg, rot, context, batch, steps, device, compile=False):
    """A filled paged cache and its ``GraphDecoder`` (warmed up: compiled / captured), as a dict."""
    dtype = next(model.parameters()).dtype
    cache = OscarCache(cfg, OSCAR, rotations=rot, sink=SINK, recent=RECENT, group_size=GROUP,
                       max_tokens=context + steps + 64, backend="paged")
    enable_oscar_attention(model, cache, absorb_v_into_o_proj=True)
    try:
        fill_paged(cache, batch, context, device, dtype)
        dec = GraphDecoder(model, cache, use_graph=device != "cpu", compile=compile)
        tok = torch.ones(batch, dtype=torch.long, device=device)
        t0 = time.perf_counter()
        # steps outside the graph (kernel JIT; compiled: compilation + a guard check), capture, one replay
        for _ in range(4 if compile else 3):
            dec.step(tok)
        sync(device)
        yield {"cache": cache, "dec": dec, "step": lambda: dec.step(tok), "graph": dec.graph,
               "warmup_s": time.perf_counter() - t0}
    finally:
        disable_oscar_attention(model)
        del cache
        gc.collect()
        if device != "cpu":
            torch.cuda.empty_cache()


def bench_oscar(model, cfg, rot, context, batch, steps, device, compile=False):
    with oscar_session(model, cfg, rot, context, batch, steps, device, compile) as s:
        step_s = time_steps(s["step"], steps, device)
        rep = replay_ms(s["graph"], steps, device)
        alloc, read = paged_bytes(s["cache"], context, batch)
        return {"step_ms": step_s * 1e3, "replay_ms": rep, "kv_alloc_bytes": alloc, "kv_read_bytes": read,
                "page": s["cache"].method.page, "warmup_s": s["warmup_s"]}


def oscar_row_bytes(cfg, rot, context):
    """Allocated pool bytes per row at ``context`` (difference of a 2-row and a 1-row allocation)."""
    out = []
    for b in (1, 2):
        c = OscarCache(cfg, OSCAR, rotations=rot, sink=SINK, recent=RECENT, group_size=GROUP,
                       max_tokens=context + 64, backend="paged")
        c.paged.allocate(b, torch.device("meta"), torch.bfloat16, context)
        out.append(c.paged.nbytes())
    return out[1] - out[0], out[0]


def equal_memory_batches(cfg, rot, context, budget_bytes, max_batch=0) -> dict:
    """Issue 8's throughput at equal KV memory: the largest batch each method fits in ``budget_bytes`` at
    ``context`` (OSCAR: pool bytes actually allocated per row, the first row's extras included; BF16: the
    StaticCache's K/V of context + 1 tokens), capped at ``max_batch`` if given."""
    per_row_oscar, first_row = oscar_row_bytes(cfg, rot, context)
    b_oscar = max(1, int((budget_bytes - (first_row - per_row_oscar)) // per_row_oscar))
    per_row_bf16 = bf16_kv_read_bytes(cfg, context, 1)  # the StaticCache holds exactly the tokens a step reads
    b_bf16 = max(1, int(budget_bytes // per_row_bf16))
    if max_batch:
        b_oscar, b_bf16 = min(b_oscar, max_batch), min(b_bf16, max_batch)
    return {"context": context, "kv_budget_bytes": budget_bytes, "oscar_bytes_per_row": per_row_oscar,
            "bf16_bytes_per_row": per_row_bf16, "oscar_batch": b_oscar, "bf16_batch": b_bf16}


# ------------------------------------------------------------------ BF16 (StaticCache + SDPA)
BF16_ATTN = "bench_bf16_static_sdpa"


def _bf16_attention(module, query, key, value, attention_mask, scaling=None, **kw):
    import torch.nn.functional as F

    out = F.scaled_dot_product_attention(query, key, value, scale=scaling, enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


@contextlib.contextmanager
def _attention_session(model, name, attention, cache, context, batch, device, compile, reset, **extra):
    """What both BF16 sessions share: ``attention`` registered as the model's attention implementation
    ``name``, one uncompiled step through ``cache`` (transformers' lazy allocation of its buffers), then a dict
    {"cache", "reset", "fwd" (the decode forward of one token per row at position ``context``; ``compile``:
    ``graph.compiled_forward(model)``, the same compilation as the OSCAR step), **extra}. At exit the model's
    attention implementation is restored and the dict emptied (a caller's reference must not keep the KV alive)."""
    from transformers import AttentionInterface

    AttentionInterface.register(name, attention)
    prev = model.config._attn_implementation
    model.set_attn_implementation(name)
    sess = {}
    try:
        ids = torch.ones(batch, 1, dtype=torch.long, device=device)
        pos = torch.full((batch, 1), context, dtype=torch.long, device=device)
        ck = {_cache_kwarg(model): cache, "use_cache": True}
        with torch.no_grad():
            model(input_ids=ids, position_ids=pos, **ck)
        f = compiled_forward(model) if compile else model
        sess.update(cache=cache, reset=reset, fwd=lambda: f(input_ids=ids, position_ids=pos, **ck).logits, **extra)
        yield sess
    finally:
        model.set_attn_implementation(prev)
        sess.clear()
        gc.collect()
        if device != "cpu":
            torch.cuda.empty_cache()


@contextlib.contextmanager
def bf16_session(model, cfg, context, batch, device, compile=False):
    """A StaticCache filled with random K/V (write position reset before every step) and the decode forward
    (``_attention_session``) with torch SDPA over it."""
    from transformers import StaticCache

    cache = StaticCache(config=cfg, max_cache_len=context + 1)

    def reset():
        for layer in cache.layers:
            layer.cumulative_length.fill_(context)

    with _attention_session(model, BF16_ATTN, _bf16_attention, cache, context, batch, device, compile, reset) as sess:
        g = torch.Generator(device=device).manual_seed(2)
        for layer in cache.layers:
            layer.keys.normal_(generator=g)
            layer.values.normal_(generator=g)
        yield sess


# ------------------------------------------------------------------ BF16 (paged, FlashInfer's decode)
PAGED_BF16_ATTN = "bench_bf16_paged"
PAGED_BF16_PAGE = 64  # tokens per page: FlashInfer's faster page of bench_decode's (16 / 64; BENCHMARKS.md, 2026-12-07)


def paged_bf16_decode_torch(q, pool, n_tokens, scaling):
    """What FlashInfer's paged BF16 decode computes, in torch (the CPU stand-in that checks this script's glue):
    q ``[B, Hq, D]``; pool ``[B * pages, 2, page, Hkv, D]`` (FlashInfer's NHD layout, K then V; sequence b owns
    pages ``b * pages ...``); each sequence attends to its first ``n_tokens``. Returns ``[B, Hq, D]``."""
    import torch.nn.functional as F

    B = q.shape[0]
    kv = pool.view(B, -1, *pool.shape[1:]).permute(2, 0, 4, 1, 3, 5)  # [2, B, Hkv, pages, page, D]
    kv = kv.reshape(*kv.shape[:3], -1, kv.shape[-1])[:, :, :, :n_tokens]
    out = F.scaled_dot_product_attention(q.unsqueeze(2), kv[0], kv[1], scale=scaling, enable_gqa=True)
    return out.squeeze(2)


def _flashinfer_decode(B, Hq, Hkv, D, page, n_tokens, scaling, dtype, device):
    """FlashInfer's BatchDecodeWithPagedKVCacheWrapper for ``B`` sequences of ``n_tokens`` each on contiguous
    pages, planned once (every replay of the step has the same lengths) with graph-stable buffers; returns
    ``run(q [B, Hq, D], pool) -> [B, Hq, D]``. Tensor-core decode, as bench_decode's FlashInfer rows."""
    import flashinfer

    pages = -(-n_tokens // page)
    i32 = dict(dtype=torch.int32, device=device)
    indptr, indices = torch.arange(B + 1, **i32) * pages, torch.arange(B * pages, **i32)
    last = torch.full((B,), n_tokens - (pages - 1) * page, **i32)
    ws = torch.empty(256 << 20, dtype=torch.uint8, device=device)
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_cuda_graph=True, use_tensor_cores=True,
                                                      paged_kv_indptr_buffer=indptr.clone(),
                                                      paged_kv_indices_buffer=indices.clone(),
                                                      paged_kv_last_page_len_buffer=last.clone())
    w.plan(indptr, indices, last, Hq, Hkv, D, page, pos_encoding_mode="NONE", sm_scale=scaling,
           q_data_type=dtype, kv_data_type=dtype)
    return lambda q, pool: w.run(q, pool)


_RUN_IDS = itertools.count()
_PAGED_BF16_RUNS: dict = {}  # run_id -> (the session's pools, its decode call): the op takes ints, not objects


def _paged_bf16_op():
    """``oscarkv_bench::paged_bf16_decode(q, k, v, layer, slot, run_id)``: writes the step's K/V ``[B, Hkv, D]``
    at token ``slot`` of every sequence's pages in the session's pool of ``layer``, then runs the session's
    decode over that pool. An opaque op, as OSCAR's ``oscarkv::paged_decode``: the compiled BF16 step traces
    through it without a graph break, and the pools stay outside the compiled graph (a pool passed as a mutated
    argument could be copied by functionalization), as OSCAR's do."""
    if not hasattr(torch.ops.oscarkv_bench, "paged_bf16_decode"):
        @torch.library.custom_op("oscarkv_bench::paged_bf16_decode", mutates_args=())
        def paged_bf16_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, slot: int,
                              run_id: int) -> torch.Tensor:
            pools, run = _PAGED_BF16_RUNS[run_id]
            pool, page = pools[layer], pools[layer].shape[2]
            at = pool.view(q.shape[0], -1, *pool.shape[1:])[:, slot // page, :, slot % page]  # [B, 2, Hkv, D]
            at[:, 0].copy_(k)
            at[:, 1].copy_(v)
            return run(q, pool)

        @paged_bf16_decode.register_fake
        def _(q, k, v, layer, slot, run_id):
            return torch.empty_like(q)
    return torch.ops.oscarkv_bench.paged_bf16_decode


def _pass_through_cache():
    from transformers import StaticCache

    class PassThroughCache(StaticCache):
        """A one-slot StaticCache (the decode step's mask sizes) whose update stores nothing: the layers hand the
        step's K/V straight to the attention function, which writes them into its own pages."""

        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            return key_states, value_states

    return PassThroughCache


@contextlib.contextmanager
def paged_bf16_session(model, cfg, context, batch, device, compile=False, decode="flashinfer", page=PAGED_BF16_PAGE):
    """BF16 with FlashInfer's paged decode in the same loop (issue 8 item 4): per layer a page pool
    ``[batch * pages, 2, page, Hkv, D]`` holding the same random K/V as ``bf16_session`` (same generator, same
    order), the step's new K/V written at slot ``context`` by the attention function, then one paged decode
    call. The layers' own cache stores nothing (``_pass_through_cache``), so the step reads no other KV.
    ``decode="torch"``: ``paged_bf16_decode_torch`` instead (CPU). Yields bf16_session's dict."""
    L, hkv, d = dims(cfg)
    hq = cfg.num_attention_heads
    n = context + 1
    pages = -(-n // page)
    dtype = next(model.parameters()).dtype
    scaling = next(m.scaling for m in model.modules() if hasattr(m, "scaling") and hasattr(m, "layer_idx"))
    g = torch.Generator(device=device).manual_seed(2)
    pools = []
    for _ in range(L):
        pool = torch.empty(batch, pages, 2, page, hkv, d, dtype=dtype, device=device)
        for side in range(2):  # bf16_session's keys.normal_, values.normal_ per layer, as [B, Hkv, n, D]
            x = torch.empty(batch, hkv, n, d, dtype=dtype, device=device).normal_(generator=g)
            t = torch.zeros(batch, pages * page, hkv, d, dtype=dtype, device=device)
            t[:, :n] = x.transpose(1, 2)
            pool[:, :, side] = t.view(batch, pages, page, hkv, d)
            del x, t
        pools.append(pool.view(batch * pages, 2, page, hkv, d))
    if decode == "flashinfer":
        run = _flashinfer_decode(batch, hq, hkv, d, page, n, scaling, dtype, device)
    else:
        run = lambda q, pool: paged_bf16_decode_torch(q, pool, n, scaling)  # noqa: E731

    op, run_id = _paged_bf16_op(), next(_RUN_IDS)
    _PAGED_BF16_RUNS[run_id] = (pools, run)

    def attention(module, query, key, value, attention_mask, scaling=None, **kw):
        out = op(query[:, :, 0].contiguous(), key[:, :, 0], value[:, :, 0], module.layer_idx, context, run_id)
        return out.unsqueeze(1), None

    try:
        with _attention_session(model, PAGED_BF16_ATTN, attention, _pass_through_cache()(config=cfg, max_cache_len=1),
                                context, batch, device, compile, lambda: None, pools=pools,
                                kv_alloc_bytes=sum(p.numel() * p.element_size() for p in pools)) as sess:
            yield sess  # reset: nothing moves between steps, the op writes slot ``context`` every time
    finally:
        pools.clear()
        _PAGED_BF16_RUNS.pop(run_id, None)


def capture_bf16(sess, device, compile, backend=None):
    """Warm up (compiled: twice, then capture without recompiling) and capture one decode step under the
    SDPA ``backend``; returns (graph or None on CPU, step function)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    reset, fwd = sess["reset"], sess["fwd"]
    ctx = sdpa_kernel([getattr(SDPBackend, backend)]) if backend else contextlib.nullcontext()
    with torch.no_grad(), ctx:
        for _ in range(2 if compile else 1):
            reset()
            fwd()
        if device == "cpu":
            def cpu_step():
                with torch.no_grad():
                    reset()
                    fwd()

            return None, cpu_step
        graph = torch.cuda.CUDAGraph()
        reset()
        stance = torch.compiler.set_stance("fail_on_recompile") if compile else contextlib.nullcontext()
        with stance, torch.cuda.graph(graph):
            fwd()

    def step():
        reset()  # every replay must start at the same write position (the graph's add_ advances it)
        graph.replay()

    return graph, step


SDPA_BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")
PAGED_BF16_DECODES = {"FLASHINFER": "flashinfer", "PAGED_TORCH": "torch"}  # PAGED_TORCH: the glue's CPU check


def bf16_backend_session(model, cfg, context, batch, device, compile, backend):
    """(session, SDPA backend for ``capture_bf16``) of one BF16 backend name: one of ``PAGED_BF16_DECODES``
    (``paged_bf16_session``), else an SDPA backend (None: torch's choice) over a StaticCache (``bf16_session``)."""
    if backend in PAGED_BF16_DECODES:
        return paged_bf16_session(model, cfg, context, batch, device, compile, PAGED_BF16_DECODES[backend]), None
    return bf16_session(model, cfg, context, batch, device, compile), backend


def _time_bf16(sess, device, compile, backend, steps):
    try:
        t0 = time.perf_counter()
        graph, step = capture_bf16(sess, device, compile, backend)
        warm = time.perf_counter() - t0
        t = time_steps(step, steps, device)
        r = {"step_ms": t * 1e3, "replay_ms": replay_ms(graph, steps, device, before=sess["reset"]), "warmup_s": warm}
        del graph
        return r
    except Exception as e:  # a backend that does not support the shape
        return {"error": error_text(e, 200)}


def bench_bf16(model, cfg, context, batch, steps, device, compile=False, backends=None):
    """BF16's step under each of ``backends`` (SDPA backend names over a StaticCache; "FLASHINFER":
    FlashInfer's paged decode, ``paged_bf16_session``; "PAGED_TORCH": the same session with the torch stand-in);
    default on CUDA: every SDPA backend and FlashInfer.
    The fastest is reported as the row's step."""
    if backends is None:
        backends = [None] if device == "cpu" else [*SDPA_BACKENDS, "FLASHINFER"]
    results, alloc = {}, None
    sdpa = [b for b in backends if b not in PAGED_BF16_DECODES]
    if sdpa:
        with bf16_session(model, cfg, context, batch, device, compile) as sess:
            for name in sdpa:
                results[name or "default"] = _time_bf16(sess, device, compile, name, steps)
            alloc = sum(layer.keys.numel() * layer.keys.element_size() * 2 for layer in sess["cache"].layers)
    for name in (b for b in backends if b in PAGED_BF16_DECODES):
        try:
            session, _ = bf16_backend_session(model, cfg, context, batch, device, compile, name)
            with session as sess:
                results[name] = {**_time_bf16(sess, device, compile, None, steps), "kv_alloc_bytes": sess["kv_alloc_bytes"]}
                alloc = alloc or sess["kv_alloc_bytes"]
        except Exception as e:  # FlashInfer not installed, or no kernel for the shape
            results[name] = {"error": error_text(e, 200)}
    ok = {k: v for k, v in results.items() if "step_ms" in v}
    best = min(ok, key=lambda k: ok[k]["step_ms"]) if ok else None
    return {"backends": results, "best": best, "step_ms": ok[best]["step_ms"] if best else None,
            "replay_ms": ok[best]["replay_ms"] if best else None, "kv_alloc_bytes": alloc,
            "kv_read_bytes": bf16_kv_read_bytes(cfg, context, batch)}


# ------------------------------------------------------------------ main
def _methods(args, ctx, oscar, bf16, equal_memory=False):
    """(name, thunk) per measured variant: "oscar" / "bf16" (uncompiled step in a CUDA graph, all SDPA
    backends for BF16) where ``--modes`` has "graph" (and, at batch 1, ``ctx`` is in ``--graph-contexts`` if given),
    "oscar_compiled" / "bf16_compiled" (``torch.compile``d step in a CUDA graph; BF16 with the SDPA
    backends of ``--compiled-bf16-backends``) where it has "compiled"."""
    out = []
    eager_ok = "graph" in args.modes and (not args.graph_contexts or ctx in args.graph_contexts or equal_memory)
    cb = None if args.smoke else args.compiled_bf16_backends
    if eager_ok:
        out.append(("oscar", lambda: oscar(False, None)))
    if "compiled" in args.modes:
        out.append(("oscar_compiled", lambda: oscar(True, None)))
    if eager_ok:
        out.append(("bf16", lambda: bf16(False, None)))
    if "compiled" in args.modes:
        out.append(("bf16_compiled", lambda: bf16(True, cb)))
    return out


def speedup_of_ideal(row: dict, suffix: str = "_compiled") -> dict | None:
    """Issue 8's batch-1 figure of one context row: OSCAR's speedup over BF16 (graph replay times), the ideal speedup
    from bytes (BF16's ideal / OSCAR's) and the share of the ideal the step reaches; None where either side is
    missing, failed or has no ideal (CPU)."""
    o, b = row.get("oscar" + suffix) or {}, row.get("bf16" + suffix) or {}
    if not all(k in r and r[k] for r in (o, b) for k in ("replay_ms", "ideal_ms")):
        return None
    speedup, ideal = b["replay_ms"] / o["replay_ms"], b["ideal_ms"] / o["ideal_ms"]
    return {"speedup": speedup, "ideal_speedup": ideal, "share_of_ideal": speedup / ideal}


def run_model(name, cfg, args, device, bw, out):
    log(f"== {name}")
    t0 = time.time()
    model = build_model(cfg, device)
    if args.fuse_projections:
        from oscarkv.integrations.transformers import fuse_projections

        log(f"fused projection groups: {fuse_projections(model)}")
    if "compiled" in args.modes:
        # one compilation of model.forward for both paths; "automatic dynamic" (torch's default) so that the
        # BF16 StaticCache of the next context length recompiles once with a symbolic length instead of once
        # per context (OSCAR's traced shapes do not depend on the context at all)
        compiled_forward(model, dynamic=None if args.compile_dynamic else False)
    L, hkv, d = dims(cfg)
    rot = random_rotations(cfg, d)
    wbytes = weight_bytes_read(model)
    rec = {"model": name, "weights_read_bytes": wbytes, "batch1": [], "equal_memory": None}
    log(f"model built in {time.time() - t0:.1f}s; weights read per step {wbytes / 1e9:.2f} GB")
    for ctx in args.contexts:
        row = {"context": ctx}
        for meth, fn in _methods(args, ctx, lambda c, b: bench_oscar(model, cfg, rot, ctx, 1, args.steps, device, c),
                                 lambda c, b: bench_bf16(model, cfg, ctx, 1, args.steps, device, c, b)):
            try:
                r = fn()
                r["ideal_ms"] = (wbytes + r["kv_read_bytes"]) / bw * 1e3 if bw == bw else None
                r["kv_bytes_per_token"] = r["kv_alloc_bytes"] / ctx
                r["bits_per_element_allocated"] = 8 * r["kv_alloc_bytes"] / (2 * L * hkv * d * ctx)
                row[meth] = r
            except Exception as e:
                row[meth] = {"error": error_text(e)}
            log(f"  {ctx:>6} {meth:14s} {json.dumps(row[meth])[:400]}")
        for suffix in ("", "_compiled"):
            if (sp := speedup_of_ideal(row, suffix)) is not None:
                row["speedup" + suffix] = sp
                log(f"  {ctx:>6} speedup{suffix:9s} {sp['speedup']:.3f}x of the ideal {sp['ideal_speedup']:.3f}x = "
                    f"{100 * sp['share_of_ideal']:.1f}% (OSCAR {row['oscar' + suffix]['replay_ms']:.3f} ms, BF16 "
                    f"{row['bf16' + suffix]['replay_ms']:.3f} ms, replay)")
        rec["batch1"].append(row)
        out["models"] = [m for m in out["models"] if m["model"] != name] + [rec]
        Path(args.out).write_text(json.dumps(out, indent=1))
    if args.tput_context:
        ctx = args.tput_context
        eq = equal_memory_batches(cfg, rot, ctx, args.kv_budget_gib * 2**30, args.max_batch)
        b_oscar, b_bf16 = eq.pop("oscar_batch"), eq.pop("bf16_batch")
        for meth, fn in _methods(args, ctx, lambda c, be: bench_oscar(model, cfg, rot, ctx, b_oscar, args.steps, device, c),
                                 lambda c, be: bench_bf16(model, cfg, ctx, b_bf16, args.steps, device, c, be), True):
            b = b_oscar if meth.startswith("oscar") else b_bf16
            if args.tput_methods and meth not in args.tput_methods.split(","):
                continue
            try:
                r = fn()
                r["batch"] = b
                r["tokens_per_s"] = b / (r["step_ms"] / 1e3)
                eq[meth] = r
            except Exception as e:
                eq[meth] = {"batch": b, "error": error_text(e)}
            log(f"  equal-memory {meth:14s} {json.dumps(eq[meth])[:400]}")
        rec["equal_memory"] = eq
    out["models"] = [m for m in out["models"] if m["model"] != name] + [rec]
    Path(args.out).write_text(json.dumps(out, indent=1))
    if args.generate_128k:
        gen_long(model, cfg, rot, args.generate_128k, device, out, args)
    del model
    gc.collect()
    if device != "cpu":
        torch.cuda.empty_cache()


GEN_REFS = ("reference", "reference_fp32_attention", "reference_exact", "reference_q8", "reference_exact_q8",
            "paged_triton", "paged_torch")  # gen_long's comparison runs


def gen_long(model, cfg, rot, ctx, device, out, args, new_tokens=16):
    """``model.generate`` (greedy) on the paged cache: a real prefill of ``ctx`` tokens + ``new_tokens`` decode
    steps, then the same tokens teacher-forced through the reference backend (history dequantized to bf16,
    SDPA), through the reference with its decode-step attention in fp32, and through an "exact" reference
    (history dequantized to fp32 and fp32 decode attention), and the last two with the CUDA kernel's int8 query
    on the INT2 history ("oscar+q8" on the reference backend: "reference_q8", "reference_exact_q8"), and the
    logits of every step compared as in tests/cache/test_gpu_paged.py (max |difference| / max |logit|);
    "paged_triton" / "paged_torch": the paged cache teacher-forced on its Triton / torch kernels (exact query).
    R_V is not folded, so the paths share all arithmetic but the attention over the cache."""
    import oscarkv.integrations.transformers as tfi
    from oscarkv.methods import LayerPlan

    ids = torch.randint(1, cfg.vocab_size, (1, ctx), device=device, generator=torch.Generator(device=device).manual_seed(3))
    res, logits = {"context": ctx}, {}
    ck = _cache_kwarg(model)
    sdpa = tfi.sdpa_attention_forward

    def sdpa_fp32(module, q, k, v, mask, **kw):  # decode steps (one query) in fp32
        if q.shape[-2] != 1:  # the prefill as in the other runs (model dtype)
            return sdpa(module, q, k.to(q.dtype), v.to(q.dtype), mask, **kw)
        mask = mask.float() if mask is not None and mask.is_floating_point() else mask
        o, w = sdpa(module, q.float(), k.float(), v.float(), mask, **kw)
        return o.to(q.dtype), w

    deq_k, deq_v = LayerPlan.dequantize_k, LayerPlan.dequantize_v
    toks = None
    for run in ("paged", *args.generate_refs):
        t0 = time.time()
        try:
            extra = dict(max_tokens=ctx + new_tokens + 16) if run.startswith("paged") else dict(backend="reference")
            if run in ("paged_triton", "paged_torch"):  # the paged cache on another kernel backend (exact query)
                extra["kernel_backend"] = run.split("_")[1]
            name = OSCAR + "+q8" if run.endswith("_q8") else OSCAR
            cache = OscarCache(cfg, name, rotations=rot, sink=SINK, recent=RECENT, group_size=GROUP, **extra)
            if run.startswith("paged") and device == "cpu":
                cache.use_paged()
            enable_oscar_attention(model, cache, absorb_v_into_o_proj=False)
            tfi.sdpa_attention_forward = sdpa_fp32 if run in ("reference_fp32_attention", "reference_exact") else sdpa
            if run.startswith("reference_exact"):  # history dequantized to fp32 (sink / tail promoted by the concatenation)
                LayerPlan.dequantize_k = lambda self, q, dtype=torch.float32: deq_k(self, q, torch.float32)
                LayerPlan.dequantize_v = lambda self, q, dtype=torch.float32: deq_v(self, q, torch.float32)
            with torch.no_grad():
                if run == "paged":  # the issue's "done when": transformers' own generate on the paged cache
                    o = model.generate(ids, attention_mask=torch.ones_like(ids), **{ck: cache}, max_new_tokens=new_tokens,
                                       do_sample=False, pad_token_id=0, output_logits=True, return_dict_in_generate=True)
                    toks = o.sequences[:, ctx:]
                    got = [x.float() for x in o.logits]
                    del o
                else:  # teacher-forced on the paged run's tokens, so every step compares the same inputs
                    got = [model(ids, **{ck: cache}, use_cache=True, logits_to_keep=1).logits[:, -1].float()]
                    for i in range(new_tokens - 1):
                        got.append(model(toks[:, i:i + 1], **{ck: cache}, use_cache=True).logits[:, -1].float())
            sync(device)
            logits[run] = got
            res[run] = {"seconds": time.time() - t0, "backend": cache.backend, "held_tokens": cache.segments(),
                        "greedy": [int(x.argmax()) for x in got]}
            del cache
        except Exception as e:
            res[run] = {"error": error_text(e), "seconds": time.time() - t0}
        finally:
            tfi.sdpa_attention_forward = sdpa
            LayerPlan.dequantize_k, LayerPlan.dequantize_v = deq_k, deq_v
            disable_oscar_attention(model)
            gc.collect()
            torch.cuda.empty_cache() if device == "cuda" else None
    if toks is not None:
        res["paged_tokens"] = toks.tolist()

    def dist(a, b):
        return [float((x - y).abs().max() / y.abs().max()) for x, y in zip(logits[a], logits[b])]

    pairs = [("paged", "reference"), ("paged", "reference_fp32_attention"), ("reference", "reference_fp32_attention"),
             ("paged", "reference_exact"), ("reference", "reference_exact"), ("paged", "reference_q8"),
             ("paged", "reference_exact_q8"), ("reference_q8", "reference_exact_q8"), ("paged", "paged_triton"),
             ("paged", "paged_torch"), ("paged_triton", "reference_exact"), ("paged_torch", "reference_exact"),
             ("paged_triton", "paged_torch"), ("reference_q8", "reference_exact"), ("reference_q8", "reference"),
             ("paged_torch", "reference_q8")]
    per_step = {f"{a} vs {b}": dist(a, b) for a, b in pairs if a in logits and b in logits}
    res["max_rel_logit_diff"] = {k: max(v) for k, v in per_step.items()}
    res["per_step"] = per_step
    log(f"  generate at {ctx}: {json.dumps(res)[:1500]}")
    out["generate_long"] = res
    Path(args.out).write_text(json.dumps(out, indent=1))


def force_decode_plan(variant: int | None = None, int2_split_scale: float | None = None) -> None:
    """Make every ``DecodePlan`` of this process run kernel ``variant`` and / or its planned INT2 split count times
    ``int2_split_scale`` (rounded, at least 1; then fixed counts, so no adaptive split table) instead of
    DecodePlan's rules (the paged cache builds its plans with ``CudaDecodeConfig(early_reads=True)``; the rules
    stay in ``DecodePlan``): a bench-only experiment, to time a model step with the plan a kernel sweep found
    fastest on the card at hand (``bench_decode.py --sweep``, whose split scales mean the same)."""
    import dataclasses

    from oscarkv.kernels import cuda_ops

    init = cuda_ops.DecodePlan.__init__

    def forced(self, batch, num_q_heads, num_kv_heads, head_dim, meta, device, dtype=torch.bfloat16,
               config=None, **kw):
        if variant is not None:
            config = dataclasses.replace(config or cuda_ops.CudaDecodeConfig(), variant=variant)
        args = (batch, num_q_heads, num_kv_heads, head_dim, meta, device, dtype, config)
        init(self, *args, **kw)
        if int2_split_scale is not None and not kw and self.n_int2:
            init(self, *args, n_hp_splits=self.n_hp, n_int2_splits=max(1, round(self.n_int2 * int2_split_scale)))

    cuda_ops.DecodePlan.__init__ = forced


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="qwen3-8b,qwen3-4b")
    ap.add_argument("--contexts", default="8192,32768,65536,131072")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--tput-context", type=int, default=32768)
    ap.add_argument("--tput-methods", default="", help="equal-memory run of these methods only (e.g. bf16_compiled)")
    ap.add_argument("--kv-budget-gib", type=float, default=40.0)
    ap.add_argument("--max-batch", type=int, default=0)
    ap.add_argument("--generate-128k", type=int, default=0, help="context of a real generate run (0: skip)")
    ap.add_argument("--generate-refs", default=",".join(GEN_REFS),
                    help="reference runs compared with the paged generate (gen_long)")
    ap.add_argument("--modes", default="graph",
                    help="graph: uncompiled step in a CUDA graph; compiled: torch.compile'd step in a CUDA graph")
    ap.add_argument("--graph-contexts", default="", help="batch-1 contexts of the uncompiled runs (default: all)")
    ap.add_argument("--compiled-bf16-backends", default="CUDNN_ATTENTION,FLASHINFER",
                    help="backends tried for the compiled BF16 step (SDPA backend names, FLASHINFER; each compiles once)")
    ap.add_argument("--static-compile", dest="compile_dynamic", action="store_false",
                    help="torch.compile(dynamic=False): one compilation per context length / batch")
    ap.add_argument("--fuse-projections", action="store_true",
                    help="oscarkv.integrations.transformers.fuse_projections: q/k/v and gate/up as one GEMM each (all modes)")
    ap.add_argument("--decode-variant", type=int, default=None,
                    help="an experiment: every CUDA DecodePlan of this run uses this kernel variant instead of "
                         "DecodePlan's default rule (force_decode_plan)")
    ap.add_argument("--decode-int2-split-scale", type=float, default=None,
                    help="an experiment: every CUDA DecodePlan of this run uses its planned INT2 split count times "
                         "this (rounded; force_decode_plan)")
    ap.add_argument("--scale-dtype", default="float16", choices=["float16", "log8"],
                    help="OSCAR's records: fp16 scale and zero, or log8 (one byte each: method oscar+log8)")
    ap.add_argument("--out", default="bench_model.json")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    global OSCAR
    OSCAR = "oscar+log8" if args.scale_dtype == "log8" else "oscar"
    if args.decode_variant is not None or args.decode_int2_split_scale is not None:
        if args.decode_int2_split_scale is not None and not args.decode_int2_split_scale > 0:
            ap.error(f"--decode-int2-split-scale must be > 0, got {args.decode_int2_split_scale}")
        force_decode_plan(args.decode_variant, args.decode_int2_split_scale)
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_decode import count, spec_list  # the list parsers of bench_decode's options

    try:
        args.contexts = spec_list(count, "8192,131072", empty_ok=True)(args.contexts)
        args.graph_contexts = spec_list(count, "131072", empty_ok=True)(args.graph_contexts)
    except argparse.ArgumentTypeError as e:
        ap.error(f"--contexts / --graph-contexts: {e}")
    args.modes = [m for m in args.modes.split(",") if m]
    if not args.modes or set(args.modes) - {"graph", "compiled"}:
        ap.error(f"--modes: {args.modes!r}; choose from graph, compiled (e.g. graph,compiled)")
    configs = sorted(p.stem for p in (ROOT / "bench" / "configs").glob("*.json"))
    unknown = [m for m in args.models.split(",") if m not in configs]
    if unknown and not args.smoke:
        ap.error(f"--models: no config for {unknown} in bench/configs; choose from {', '.join(configs)}")
    args.generate_refs = [x for x in args.generate_refs.split(",") if x]
    bad = set(args.generate_refs) - set(GEN_REFS)
    if bad:
        ap.error(f"--generate-refs: unknown {sorted(bad)}")
    args.compiled_bf16_backends = [x for x in args.compiled_bf16_backends.split(",") if x]
    device = "cpu" if args.smoke else "cuda"
    out = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv, "models": [],
           "torch": torch.__version__, "oscar_method": OSCAR}
    try:
        import transformers

        out["transformers"] = transformers.__version__
        out["commit"] = source_commit()
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
