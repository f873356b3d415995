"""Decode-attention and append benchmarks for the paged INT2 cache (issue 7).

Run on the GPU machine from the repo root (FlashInfer optional: see ../shared/gpu-kernels.md):

    PYTHONPATH=src python3 bench/bench_decode.py --out $OUT/bench_d128.json
    PYTHONPATH=src python3 bench/bench_decode.py --head-dim 64 --no-flashinfer --out $OUT/bench_d64.json

Shape: 32 query heads, 8 KV heads (Qwen3-8B attention), head_dim 128 (or 64 with --head-dim 64), bf16 q;
sink 64 + recent 256 (+ up to 15 more before a page is demoted) in BF16, the rest INT2 (group = head_dim,
fp16 scale/zero: 72 B per token per KV head at d=128), block_size 16, shuffled block tables.

Methods, all in the same run: ours = CUDA kernel on the tile16 pool (``decode_attention`` with a
``DecodePlan``), our Triton fallback (logical pool), SDPA flash and SDPA cuDNN on dense BF16, FlashInfer
BF16 paged decode and FlashInfer FP8-e4m3 KV paged decode (tensor-core decode, page 16).

Timing: every measured call sequence is captured in a CUDA graph and replayed; CUDA events around each
replay; median over replays, divided by the calls per graph. Each graph cycles over R copies of the
data (R chosen so the bytes between two reads of the same copy are >= 3x the 60 MB L2), so numbers are
HBM numbers, not L2 numbers. ``--smoke`` runs tiny sizes on CPU to check the script itself.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

import torch

SMOKE = "--smoke" in sys.argv
if SMOKE:
    os.environ.setdefault("TRITON_INTERPRET", "1")

from oscarkv.kernels import (  # noqa: E402
    CudaDecodeConfig,
    DecodeMeta,
    DecodePlan,
    MixedKVCache,
    MixedKVPool,
    TritonDecodeConfig,
    decode_attention,
    write_kv,
)
from oscarkv.fileio import source_commit  # noqa: E402
from oscarkv.kernels.cuda_ops import check_merge_slices  # noqa: E402
from oscarkv.quant import QuantConfig, int2_len  # noqa: E402

HQ, HKV, D = 32, 8, 128
SINK, RECENT, BS = 64, 256, 16
EARLY = True  # CudaDecodeConfig.early_reads of our kernel (--early-reads)
EVICT = True  # CudaDecodeConfig.l2_evict_first of our kernel (--no-evict-first)
CTA_ORDER = None  # CudaDecodeConfig.cta_order of our kernel (--cta-order)
POLL_MERGE = False  # CudaDecodeConfig.poll_merge of our kernel (--poll-merge)
MERGE_SLICES = None  # CudaDecodeConfig.merge_slices of our kernel (--merge-slices; None: the plan's rule)
HP_PER_WARP = None  # CudaDecodeConfig.hp_tiles_per_warp of our kernel (--hp-tiles-per-warp; None: the plan's rule)
VARIANT = None  # CudaDecodeConfig.variant of our kernel where a caller names none (--variant; None: the plan's rule)
SEQUENTIAL = False  # our INT2 block ids in pool order instead of a random permutation (--sequential)
SCALE = "float16"  # our pools' QuantConfig.scale_dtype (--scale-dtype; "log8": one byte each of scale and zero)


def quant_cfgs() -> tuple[QuantConfig, QuantConfig]:
    """K and V QuantConfig of our pools (clip 0.96 / 0.92, one group per row, --scale-dtype; log8 with scale_top 2:
    the largest scale of the benchmarks' randn rows is ~1.5)."""
    top = {"scale_top": 2} if SCALE == "log8" else {}
    return (QuantConfig(group_size=D, clip_ratio=0.96, scale_dtype=SCALE, **top),
            QuantConfig(group_size=D, clip_ratio=0.92, scale_dtype=SCALE, **top))


def ours_plan(B, meta, dev, config, **kw):
    """Our kernel's DecodePlan for batch ``B`` and step metadata ``meta`` (Qwen3-8B heads, bf16, --scale-dtype)."""
    return DecodePlan(B, HQ, HKV, D, meta, dev, torch.bfloat16, config, scale_dtype=SCALE, **kw)


def scale_bytes() -> int:
    return 1 if SCALE == "log8" else 2


def with_scale(fmt: str, f):
    """f() with our pools in scale format ``fmt`` (SCALE restored after)."""
    global SCALE
    old, SCALE = SCALE, fmt
    try:
        return f()
    finally:
        SCALE = old


def variant_spec(x):
    """A kernel variant of a --*-variants list ("4"): its number."""
    x = str(x).strip()
    if x.isdigit():
        return int(x)
    raise ValueError(f"variant {x!r}: expected a variant number")


def ours_config(var, **kw):
    """CudaDecodeConfig of our kernel for a variant spec (None: --variant's, else the plan's rule; a number or a
    variant_spec string)."""
    v = VARIANT if var is None else variant_spec(var)
    return CudaDecodeConfig(**{**dict(variant=v, early_reads=EARLY, l2_evict_first=EVICT, cta_order=CTA_ORDER,
                                      poll_merge=POLL_MERGE, merge_slices=MERGE_SLICES,
                                      hp_tiles_per_warp=HP_PER_WARP), **kw})


L2_BYTES = 60 << 20


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------------------------- timing
def time_calls(fns, reps=30, warmup=3, min_calls=int(os.environ.get("BENCH_MIN_CALLS", "32"))):
    """Median seconds per call of the sequence ``fns`` (a list of zero-arg callables), graph-replayed.

    The graph repeats the sequence until it holds at least ``min_calls`` calls, so the replay's own launch
    latency (the GPU idles between the start event and the first kernel while the host submits the graph)
    is spread over many calls, as it is in a model's captured decode step. Repeating the sequence keeps
    each call on different memory than the one before it (the copies cover >= 3x L2)."""
    if SMOKE:
        t = time.perf_counter()
        for f in fns:
            f()
        return (time.perf_counter() - t) / len(fns)
    fns = list(fns) * -(-min_calls // len(fns))
    for f in fns:  # compile / allocate outside capture
        f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for f in fns:
            f()
    for _ in range(warmup):
        g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    del g
    return statistics.median(ts) / len(fns)


def copy_bandwidth(dev):
    """Device-to-device copy, bytes read + written over time; best of a few forms (the reference ceiling)."""
    n = (64 << 20) if SMOKE else (4 << 30)
    out = {}
    x = torch.empty(n, dtype=torch.uint8, device=dev)
    y = torch.empty_like(x)
    x.random_(0, 255)
    out["copy_graph"] = 2 * n / time_calls([lambda: y.copy_(x)], reps=20)
    if not SMOKE:
        ts = []
        for _ in range(10):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            y.copy_(x)
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / 1e3)
        out["copy_events"] = 2 * n / statistics.median(ts)
    del x, y
    return max(out.values()), out


def split_spec(spec: str) -> list[tuple[str, tuple[int, int]]]:
    """argparse type of ``--alt-splits`` / ``--sweep-splits``: "LxB=hp+int2,..." -> [("LxB", (hp, int2)), ...] (a
    point may repeat)."""
    out = []
    for e in (x for x in spec.split(",") if x):
        pt, _, sp = e.partition("=")
        hp, _, i2 = sp.partition("+")
        if not (re.fullmatch(r"\d+x\d+", pt) and hp.isdigit() and i2.isdigit()):
            raise argparse.ArgumentTypeError(f"'{e}' is not LxB=hp+int2 (e.g. 131072x1=2+31)")
        out.append((pt, (int(hp), int(i2))))
    return out


def spec_list(parse, example, empty_ok=False):
    """argparse type of a comma-separated list whose entries ``parse`` converts (raising ValueError): the whole list
    is checked when the arguments are read, so a bad entry is one line before any GPU work starts. ``empty_ok``: ""
    is the empty list (``--contexts ""``: no table rows, e.g. a sweep only)."""
    def convert(x):
        try:
            out = [parse(e.strip()) for e in str(x).split(",") if e.strip()]
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{e} (e.g. {example})") from None
        if not out and not empty_ok:
            raise argparse.ArgumentTypeError(f"empty list (e.g. {example})")
        return out
    return convert


def count(x, low=1):
    if not x.isdigit() or int(x) < low:
        raise ValueError(f"{x!r} is not an integer >= {low}")
    return int(x)


def point(x):
    """"LxB" -> (L, B)."""
    if not re.fullmatch(r"[1-9]\d*x[1-9]\d*", x):
        raise ValueError(f"{x!r} is not a point LxB (context x batch)")
    L, B = x.split("x")
    return int(L), int(B)


def tagged_point(parse_tag):
    """"LxB:X" -> (L, B, parse_tag(X))."""
    def parse(x):
        pt, sep, tag = x.partition(":")
        if not sep:
            raise ValueError(f"{x!r} is not LxB:X")
        return (*point(pt), parse_tag(tag))
    return parse


def positive_float(x):
    if not (re.fullmatch(r"\d+(\.\d*)?|\.\d+", x) and float(x) > 0):
        raise ValueError(f"{x!r} is not a positive number")
    return float(x)


def probe_mode(x):
    """A kernel probe of --probe-modes (a key of PROBES)."""
    if not x.isdigit() or int(x) not in PROBES:
        raise ValueError(f"probe mode {x!r} is unknown; choose from {sorted(PROBES)}")
    return int(x)


def hp_split(x):
    """A BF16-tier split count of --sweep-hp, or "auto" (the plan's)."""
    return None if x == "auto" else count(x)


def copies_for(nbytes):
    return 2 if SMOKE else max(1, math.ceil(3 * L2_BYTES / max(nbytes, 1)))


# --------------------------------------------------------------------------------------------- caches
def lens_for(L):
    """(hp_len, int2_len) of a sequence of L tokens under the page rule (B = block_size)."""
    n = int2_len(L, SINK, RECENT, BS)
    return L - n, n


def int2_bytes(B, L):
    hp, n = lens_for(L)
    return B * HKV * (n * (2 * (D // 4) + 4 * scale_bytes()) + hp * 2 * D * 2)


def bf16_bytes(B, L):
    return B * HKV * L * 2 * D * 2


def make_mixed(B, L, R, dev, layout, sequential=None):
    """Pool with R independent copies of B sequences of L tokens (random contents), and R metas. Block ids are a
    random permutation (a fragmented pool, like the peers' pages), or with ``sequential`` in pool order (None:
    SEQUENTIAL)."""
    sequential = SEQUENTIAL if sequential is None else sequential
    hp_len, n = lens_for(L)
    nhp, ni = -(-hp_len // BS), -(-n // BS)
    cfg, vcfg = quant_cfgs()
    pool = MixedKVPool.allocate(R * B * ni + 1, R * B * nhp + 1, BS, HKV, D, cfg, vcfg, device=dev, layout=layout)
    for t in (pool.k_codes, pool.v_codes):
        t.random_(0, 256)
    for t in (pool.k_scale, pool.v_scale):
        t.random_(32, 112) if SCALE == "log8" else t.uniform_(0.05, 0.5)  # log8: 2^(2 - e/32) in [0.18, 3]
    for t in (pool.k_zero, pool.v_zero):
        t.random_(116, 129) if SCALE == "log8" else t.uniform_(-1.0, 0.0)  # log8: zq in [-12, 0]
    for t in (pool.k_hp, pool.v_hp):
        t.normal_()
    gen = torch.Generator(device="cpu").manual_seed(0)
    iperm = (torch.arange(R * B * ni) if sequential else torch.randperm(R * B * ni, generator=gen)) + 1
    hperm = torch.randperm(R * B * nhp, generator=gen) + 1
    metas = []
    for r in range(R):
        ib = iperm[r * B * ni : (r + 1) * B * ni].view(B, ni).int() if ni else torch.zeros(B, 1, dtype=torch.int32)
        hb = hperm[r * B * nhp : (r + 1) * B * nhp].view(B, nhp).int()
        metas.append(DecodeMeta(hb.to(dev), torch.full((B,), hp_len, dtype=torch.int32, device=dev),
                                ib.to(dev), torch.full((B,), n, dtype=torch.int32, device=dev), hp_len, n))
    return pool, metas


# ------------------------------------------------------------------------------------------- methods
PROBES = {1: "loads_only", 6: "no_unpack", 7: "math_only", 8: "register_loads_only"}  # DecodePlan.run's INT2-loop probes that --probe times


def bench_ours(B, L, dev, backend, variants=(None,), split_scale=None, probe=0, hp_splits=None, splits=None):
    """Ours: the CUDA kernel (best of ``variants``, None = the default rule of ``CudaDecodeConfig``;
    ``split_scale`` multiplies the planned INT2 split count, ``hp_splits`` fixes the BF16-tier split count,
    ``splits`` = (hp, int2) fixes both) or the Triton fallback."""
    nbytes = int2_bytes(B, L)
    R = copies_for(nbytes)
    pool, metas = make_mixed(B, L, R, dev, "tile16" if backend == "cuda" else "logical")
    q = torch.randn(B, HQ, D, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(q)
    if backend == "cuda":
        best = None
        for var in variants:
            cfg = ours_config(var)
            plans = [ours_plan(B, m, dev, cfg) for m in metas]  # one per step (= copy)
            fixed = splits  # (hp, int2) split counts given or derived from this variant's plan, else None
            if fixed is None and (split_scale or hp_splits is not None):
                fixed = (plans[0].n_hp if hp_splits is None else hp_splits,
                         max(1, round(plans[0].n_int2 * (split_scale or 1.0))))
            if fixed is not None:
                plans = [ours_plan(B, m, dev, cfg, n_hp_splits=fixed[0], n_int2_splits=fixed[1]) for m in metas]
            if probe:  # 1: loads only, 6: no code unpack, 7: math only (see DecodePlan.run)
                t = time_calls([lambda m=m, p=p: p.run(q, pool, m, 1.0, out=out, _probe=probe) for m, p in zip(metas, plans)])
            else:
                t = time_calls([lambda m=m, p=p: decode_attention(q, pool, m, plan=p, out=out) for m, p in zip(metas, plans)])
            if best is None or t < best[0]:
                best = (t, dict(splits=f"{plans[0].n_hp}+{plans[0].n_int2}", variant=plans[0].variant))
        t, extra = best
    else:
        cfg = TritonDecodeConfig(ctas_per_sm=4)
        t = time_calls([lambda m=m: decode_attention(q, pool, m, backend="triton", config=cfg, out=out) for m in metas])
        extra = {}
    del pool, metas
    return t, nbytes, extra


def bench_capacity(B, L, cap, dev):
    """A plan sized for ``cap`` tokens (as the paged cache's graph-captured step plans for its capacity) run at
    context L: the plan for L itself, and the capacity plan with CudaDecodeConfig.adaptive_splits at its default
    (True since the fifteenth session; None before), True (each sequence's own split counts) and False (every
    split). Returns {label: us}."""
    from dataclasses import replace

    R = copies_for(int2_bytes(B, L))
    pool, metas = make_mixed(B, L, R, dev, "tile16")
    q = torch.randn(B, HQ, D, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(q)
    capm = [replace(m, max_int2_len=cap) for m in metas]
    res = {}
    for label, ms, kw in (("own_plan", metas, {}), ("capacity_default", capm, {}),
                          ("capacity_adaptive", capm, dict(adaptive_splits=True)),
                          ("capacity_fixed", capm, dict(adaptive_splits=False))):
        plans = [ours_plan(B, m, dev, ours_config(None, **kw)) for m in ms]
        res[label] = time_calls([lambda m=m, p=p: decode_attention(q, pool, m, plan=p, out=out)
                                 for m, p in zip(metas, plans)]) * 1e6
        res[label + "_splits"] = f"{plans[0].n_hp}+{plans[0].n_int2}"
    del pool, metas
    return res


def bench_diag(B, L, dev, variant):
    """Where the fixed cost of a call goes (issue 7): the same launch with the INT2 tier and / or the BF16
    tier emptied (lens 0, same grid), and with one hp tile per warp. Returns {label: us}."""
    from dataclasses import replace

    R = copies_for(int2_bytes(B, L))
    pool, metas = make_mixed(B, L, R, dev, "tile16")
    q = torch.randn(B, HQ, D, device=dev, dtype=torch.bfloat16)
    out = torch.empty_like(q)
    cfg = ours_config(variant)
    plans = [ours_plan(B, m, dev, cfg) for m in metas]

    def timed(ms, ps=None, probe=0):
        ps = ps or plans
        if probe:  # DecodePlan.run's benchmark probes (garbage output)
            return time_calls([lambda m=m, p=p: p.run(q, pool, m, 1.0, out=out, _probe=probe) for m, p in zip(ms, ps)]) * 1e6
        return time_calls([lambda m=m, p=p: decode_attention(q, pool, m, plan=p, out=out) for m, p in zip(ms, ps)]) * 1e6

    z = lambda t: torch.zeros_like(t)  # noqa: E731
    empty = [replace(m, hp_lens=z(m.hp_lens), int2_lens=z(m.int2_lens)) for m in metas]  # both tiers emptied
    res = {"splits": f"{plans[0].n_hp}+{plans[0].n_int2}", "full": timed(metas),
           "no_int2": timed([replace(m, int2_lens=z(m.int2_lens)) for m in metas]),
           "no_hp": timed([replace(m, hp_lens=z(m.hp_lens)) for m in metas]),
           "empty": timed(empty)}
    # the fixed cost split further: the grid's launch alone (every CTA returns at once), and the call without
    # the merge (every CTA returns after writing its partial result), empty and full; the loads alone
    res.update(launch_only=timed(metas, probe=2), empty_prologue_only=timed(empty, probe=4),
               empty_no_epilogue=timed(empty, probe=5), empty_no_merge=timed(empty, probe=3),
               full_prologue_only=timed(metas, probe=4), full_no_epilogue=timed(metas, probe=5),
               full_no_merge=timed(metas, probe=3), loads_only=timed(metas, probe=1))
    for hpw in (1, 2):
        cfg1 = ours_config(variant, hp_tiles_per_warp=hpw)
        p1 = [ours_plan(B, m, dev, cfg1) for m in metas]
        res[f"hp{hpw}_splits"] = f"{p1[0].n_hp}+{p1[0].n_int2}"
        res[f"hp_tiles_per_warp_{hpw}"] = timed(metas, p1)
    if plans[0].cluster:  # cluster variants run exactly one cluster of splits: no 1 + 1 plan
        del pool, metas
        return res
    # launch + prologue + epilogue without a merge worth the name: one split per tier, nothing cached
    p1 = [ours_plan(B, m, dev, cfg, n_hp_splits=1, n_int2_splits=1) for m in metas]
    res["empty_1+1_splits"] = timed(empty, p1)
    res["launch_only_1+1_splits"] = timed(metas, p1, probe=2)
    res["empty_no_merge_1+1_splits"] = timed(empty, p1, probe=3)
    res["empty_prologue_only_1+1_splits"] = timed(empty, p1, probe=4)
    res["empty_no_epilogue_1+1_splits"] = timed(empty, p1, probe=5)
    del pool, metas
    return res


def read_floor_once(buf, n16, sink, ctas, threads, pattern=0):
    """One launch of the bare read kernel (oscar_read_pattern) over the first ``n16`` 16-byte words of ``buf``:
    pattern 0 = one grid-stride sweep (the read floor), 1 = one contiguous stream per warp."""
    from oscarkv.kernels import cuda_ops

    err = cuda_ops.lib().oscar_read_pattern(buf.data_ptr(), n16, sink.data_ptr(), ctas, threads, pattern,
                                            torch.cuda.current_stream().cuda_stream)
    assert err == 0, err


def read_floor(nbytes, dev, sms):
    """Issue 7's measured bound: the fastest a single launch reads ``nbytes`` (a bare grid-stride read kernel,
    oscar_read_pattern, over R copies so each call misses L2), best over grid shapes. Returns (s, info)."""
    n16 = -(-nbytes // 16)
    R = copies_for(nbytes)
    bufs = [torch.empty(n16 * 16, dtype=torch.uint8, device=dev).random_(0, 255) for _ in range(R)]
    sink = torch.zeros(1, dtype=torch.int32, device=dev)
    best = None
    for ctas_per_sm in (1, 2, 4, 8, 16):
        for threads in (256, 512, 1024):
            if ctas_per_sm * threads > 2048:
                continue
            ctas = ctas_per_sm * sms
            t = time_calls([lambda b=b, c=ctas, th=threads: read_floor_once(b, n16, sink, c, th) for b in bufs])
            if best is None or t < best[0]:
                best = (t, dict(ctas=ctas, threads=threads))
    del bufs
    return best


def read_records_once(pool, table, order, ctas, threads, sink):
    """One launch of the records-read probe kernel (oscar_read_records) over ``pool``'s INT2 records listed in
    ``table`` (block ids, flattened), order 0 = block-outer, 1 = head-outer; ``sink`` an int32 device scalar."""
    from oscarkv.kernels import cuda_ops

    sblk, sh = cuda_ops.check_pool_records(pool)
    err = cuda_ops.lib().oscar_read_records(pool.k_codes.data_ptr(), table.data_ptr(), table.numel(), HKV, sblk, sh,
                                            D, order, sink.data_ptr(), ctas, threads,
                                            torch.cuda.current_stream().cuda_stream, cuda_ops.scale_format(pool))
    assert err == 0, err


def read_records(B, L, dev, sms):
    """The pool's records read the way the decode kernel reads a tile, nothing else (oscar_read_records): order
    0 = block-outer (contiguous), 1 = head-outer (one KV head's records in table order, as a split reads them);
    best over grid shapes, and at the decode kernel's own batch-1 grid (one 8-warp CTA per SM). Over R copies
    of the pool so that each call misses L2. Returns a dict of results."""
    pool, metas = make_mixed(B, L, copies_for(int2_bytes(B, L)), dev, "tile16")
    tables = [m.int2_block_tables.reshape(-1).contiguous() for m in metas]
    nbytes = tables[0].numel() * HKV * (8 * D + 64 * scale_bytes())
    sink = torch.zeros(1, dtype=torch.int32, device=dev)

    def once(tb, order, ctas, threads):
        read_records_once(pool, tb, order, ctas, threads, sink)

    out = dict(L=L, B=B, bytes=nbytes)
    for order in (0, 1):
        best = None
        shapes = [(c * sms, th) for c in (1, 2, 4, 8) for th in (256, 512) if c * th <= 2048] + [(sms, 256)]
        for ctas, th in shapes:
            t = time_calls([lambda tb=tb, o=order, c=ctas, h=th: once(tb, o, c, h) for tb in tables])
            if (ctas, th) == (sms, 256):
                out[f"order{order}_one_cta_per_sm_us"] = t * 1e6
            if best is None or t < best[0]:
                best = (t, ctas, th)
        out[f"order{order}_us"], out[f"order{order}_grid"] = best[0] * 1e6, [best[1], best[2]]
    del pool
    return out


def bench_sdpa(B, L, dev, which):
    """BF16 SDPA. GQA decode is fed as MHA over KV heads with the g query heads of each KV head as g query
    rows (no mask), which is exactly GQA decode and lets the kernel read K/V once."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    nbytes = bf16_bytes(B, L)
    R = copies_for(nbytes)
    kv = [(torch.randn(B, HKV, L, D, device=dev, dtype=torch.bfloat16), torch.randn(B, HKV, L, D, device=dev, dtype=torch.bfloat16)) for _ in range(R)]
    q = torch.randn(B, HKV, HQ // HKV, D, device=dev, dtype=torch.bfloat16)
    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[which]

    def call(k, v):
        with sdpa_kernel([be]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    t = time_calls([lambda k=k, v=v: call(k, v) for k, v in kv])
    del kv
    return t, nbytes


def flashinfer_config(x):
    """A FlashInfer decode configuration of --flashinfer-configs: "tc16" = tensor-core decode (FlashInfer's
    ``use_tensor_cores=True``) on pages of 16 tokens, "cc64" = its CUDA-core decode on pages of 64."""
    m = re.fullmatch(r"(tc|cc)(\d+)", str(x).strip())
    if not m or int(m.group(2)) < 1:
        raise ValueError(f"FlashInfer config {x!r}: expected tc<page> or cc<page>, e.g. tc16 or cc64")
    return m.group(1) == "tc", int(m.group(2))


def flashinfer_configs(x):
    """--flashinfer-configs: a comma-separated list of flashinfer_config names, checked."""
    out = [c.strip() for c in x.split(",") if c.strip()]
    try:
        [flashinfer_config(c) for c in out]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not out or len(set(out)) < len(out):
        raise argparse.ArgumentTypeError(f"{x!r}: expected distinct configurations, e.g. tc16,cc16,tc64")
    return out


def bench_flashinfer(B, L, dev, kv_dtype, config="tc16"):
    """FlashInfer's paged decode on a BF16 (or FP8) cache in random page order; ``config``: see
    flashinfer_config."""
    import flashinfer

    tensor_cores, page = flashinfer_config(config)
    esz = 1 if kv_dtype == torch.float8_e4m3fn else 2
    nbytes = B * HKV * L * 2 * D * esz
    R = copies_for(nbytes)
    npg = -(-L // page)
    gen = torch.Generator(device="cpu").manual_seed(0)
    ws = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tensor_cores)
    indptr = torch.arange(B + 1, dtype=torch.int32, device=dev) * npg
    indices = torch.randperm(B * npg, generator=gen).int().to(dev)
    last = torch.full((B,), L - (npg - 1) * page, dtype=torch.int32, device=dev)
    w.plan(indptr, indices, last, HQ, HKV, D, page, pos_encoding_mode="NONE", q_data_type=torch.bfloat16,
           kv_data_type=kv_dtype)
    caches = []
    for _ in range(R):
        c = torch.randn(B * npg, 2, page, HKV, D, device=dev, dtype=torch.bfloat16)
        caches.append(c.to(kv_dtype) if kv_dtype != torch.bfloat16 else c)
        del c
    q = torch.randn(B, HQ, D, device=dev, dtype=torch.bfloat16)
    kw = dict(k_scale=1.0, v_scale=1.0) if kv_dtype == torch.float8_e4m3fn else {}
    t = time_calls([lambda c=c: w.run(q, c, **kw) for c in caches])
    del caches
    return t, nbytes


def append_steps(B, dev, backend, steps=16, pad=0, rotation=None):
    """The append benchmark's set-up: a pool past the windows for B sequences and ``steps`` decode steps'
    plans (one row per sequence each, a page per sequence demoted once per 16 steps; ``pad``: see bench_append).
    Returns ``(step_fns, n_demotions)``: one callable per step doing the step's append (``rotation``: see
    bench_append). bench/ncu_append.py runs them eagerly for Nsight Compute."""
    cfg, vcfg = quant_cfgs()
    L0 = SINK + RECENT + 40
    nb = B * (-(-(L0 + steps) // BS) + 2) + 4
    layout = "tile16" if backend == "cuda" else "logical"
    pool = MixedKVPool.allocate(nb, nb, BS, HKV, D, cfg, vcfg, device=dev, layout=layout)
    cache = MixedKVCache(nb, nb, BS, SINK, RECENT)
    ids = list(range(B))
    for i in ids:
        cache.add(i)
    write_kv(pool, torch.randn(B * L0, HKV, D, device=dev).bfloat16(), torch.randn(B * L0, HKV, D, device=dev).bfloat16(),
             cache.plan_append(ids, [L0] * B), backend=backend)
    plans = [cache.plan_append(ids, [1] * B).to(dev) for _ in range(steps)]
    if pad:
        plans = [p.pad_pages(pad * B) for p in plans]
    n_dem = sum(int(p.demote_src.numel() > 0) for p in plans)
    k = torch.randn(B, HKV, D, device=dev).bfloat16()
    v = torch.randn(B, HKV, D, device=dev).bfloat16()
    if rotation is None:
        return [lambda p=p: write_kv(pool, k, v, p, backend=backend) for p in plans], n_dem
    from oscarkv.rotation import rotate_with_keys

    R = torch.linalg.qr(torch.randn(D, D, device=dev))[0].contiguous()[None]
    q = torch.randn(B, 4 * HKV, D, device=dev).bfloat16()
    q_out = torch.empty_like(q)

    def fused(p):
        write_kv(pool, k, v, p, backend=backend, rotation=R, q=q, q_out=q_out)

    def gemm(p):
        qr, kr = rotate_with_keys(q.unsqueeze(2), k.unsqueeze(2), R)
        q_out.copy_(qr.squeeze(2))
        write_kv(pool, kr.squeeze(2), v, p, backend=backend)

    return [lambda p=p: (fused if rotation == "fused" else gemm)(p) for p in plans], n_dem


def bench_append(B, dev, backend, steps=16, rotation=None, pad=0):
    """Steady-state decode steps of B sequences (past the windows): per step one row per sequence into the
    ring, and once per 16 steps a whole page per sequence quantized into INT2. Returns seconds per step
    (amortized over ``steps`` consecutive steps captured in one graph; K and V, all KV heads, one layer).

    ``rotation`` (branch fused-rotation): "fused": R_K applied inside the append to the new K rows and the step's
    queries (GQA 4: write_kv(..., rotation=, q=, q_out=)); "gemm": the same work as the unfused step does it,
    ``rotation.rotate_with_keys`` (one fp32 GEMM per KV head, casts) then the plain append.

    ``pad`` > 0: each step's page view padded to ``pad * B`` pages (``WritePlan.pad_pages``), as the fixed tables
    of a graph-captured model step are (``PagedState``: one page per row since 2026-12-05, three before)."""
    fns, n_dem = append_steps(B, dev, backend, steps, pad, rotation)
    return time_calls(fns), n_dem


def check_accuracy(dev):
    """CUDA kernel vs the torch reference (fp64) on caches written by the CUDA append kernel."""
    from oscarkv.kernels.reference import decode_attention_torch

    out = []
    for L, B in [(32768, 1), (5000, 4)]:
        cfg, vcfg = quant_cfgs()
        nb = B * (L // BS + 3) + 2
        pool = MixedKVPool.allocate(nb, nb, BS, HKV, D, cfg, vcfg, device=dev, layout="tile16")
        cache = MixedKVCache(nb, nb, BS, SINK, RECENT)
        ids = list(range(B))
        lens = [L - 37 * i for i in ids]
        for i in ids:
            cache.add(i)
        for i in ids:  # prefill (pages straight into INT2), then 20 decode steps (one page demoted)
            n = lens[i] - 20
            write_kv(pool, torch.randn(n, HKV, D, device=dev).bfloat16(), torch.randn(n, HKV, D, device=dev).bfloat16(),
                     cache.plan_append([i], [n]))
        for _ in range(20):
            write_kv(pool, torch.randn(B, HKV, D, device=dev).bfloat16(), torch.randn(B, HKV, D, device=dev).bfloat16(),
                     cache.plan_append(ids, [1] * B))
        meta = cache.metadata(ids, device=dev)
        q = torch.randn(B, HQ, D, device=dev).bfloat16() * 3
        ref = decode_attention_torch(q, pool, meta, compute_dtype=torch.float64)
        o = decode_attention(q, pool, meta)
        rel = float((o.double() - ref).norm() / ref.norm())
        mx = float((o.double() - ref).abs().max())
        out.append(dict(L=L, B=B, rel_err=rel, max_abs_err=mx, ref_rms=float(ref.pow(2).mean().sqrt())))
        log(f"accuracy cuda L={L} B={B}: rel {rel:.2e} max|err| {mx:.2e}")
    return out


# ---------------------------------------------------------------------------------------------- main
def main():
    global HQ, HKV, D, SINK, RECENT, EARLY, EVICT, SEQUENTIAL, CTA_ORDER, POLL_MERGE, MERGE_SLICES, SCALE, HP_PER_WARP
    global VARIANT
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_results.json")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--contexts", type=spec_list(count, "4096,32768", empty_ok=True), default=None,
                    help="contexts of the table (default 4096,16384,32768,65536,131072; 700 with --smoke; \"\": none)")
    ap.add_argument("--batches", type=spec_list(count, "1,32"), default=None,
                    help="batches of the table (default 1,8,32,128; 1,2 with --smoke)")
    ap.add_argument("--max-bf16-gb", type=float, default=40.0, help="skip points whose BF16 cache exceeds this")
    ap.add_argument("--no-flashinfer", action="store_true")
    ap.add_argument("--flashinfer-configs", type=flashinfer_configs,
                    default=["tc16", "tc64"], help="FlashInfer decode configurations to time (tc|cc + page size, e.g. "
                    "tc16,cc16,tc64,cc64); with several, the tables take the fastest of each dtype. Default: its "
                    "tensor-core decode on pages of 16 and of 64 (64 the faster in 19 of the 20 point-dtype pairs of the "
                    "four-configuration run on an H100, 2026-12-07, 16 in the other; the CUDA-core decode the "
                    "fastest once, by 0.1 us)")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--no-append", action="store_true")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--sequential", action="store_true", help="our INT2 block ids in pool order (default: random)")
    ap.add_argument("--scale-dtype", default="float16", choices=["float16", "log8"],
                    help="our pools' scale / zero format (log8: one byte each, records of 8 d + 64 bytes)")
    ap.add_argument("--also-log8", action="store_true", help="time ours on log8 records too (column ours_log8)")
    ap.add_argument("--no-evict-first", action="store_true", help="CudaDecodeConfig.l2_evict_first=False for our kernel")
    ap.add_argument("--poll-merge", action="store_true", help="CudaDecodeConfig.poll_merge=True for our kernel")
    ap.add_argument("--merge-slices", type=int, default=None, help="CudaDecodeConfig.merge_slices of our kernel (1-8; "
                    "default: the plan's rule)")
    ap.add_argument("--variant", type=variant_spec, default=None,
                    help="CudaDecodeConfig.variant of our kernel wherever a mode names none: the table rows (ours, "
                    "ours_log8, ours_alt) and --capacity-plan (default: the plan's rule; the plan's split counts "
                    "follow the variant's CTAs per SM); --sweep and --probe name their own")
    ap.add_argument("--hp-tiles-per-warp", type=count, default=None,
                    help="CudaDecodeConfig.hp_tiles_per_warp of our kernel: BF16-tier tiles per warp, which sets the "
                    "plan's BF16-tier split count (and so its INT2 count; default: the plan's rule)")
    ap.add_argument("--cta-order", default="auto", choices=["auto", "split", "sequence"],
                    help="CudaDecodeConfig.cta_order for our kernel (auto = None)")
    ap.add_argument("--sweep", action="store_true", help="first time the CUDA kernel's variants and split counts")
    ap.add_argument("--sweep-points", type=spec_list(point, "131072x1,32768x1"),
                    default="131072x1,32768x1,131072x32,16384x8", help="LxB points of --sweep")
    ap.add_argument("--sweep-variants", type=spec_list(variant_spec, "4,7,11"), default="0,1,2,3,4,5,6,7")
    ap.add_argument("--sweep-scales", type=spec_list(positive_float, "0.5,1.0,2.0"), default="0.5,1.0,2.0",
                    help="multipliers of the planned INT2 split count")
    ap.add_argument("--alt-splits", type=split_spec, default=[],
                    help="LxB=hp+int2,...: also time our kernel with these split counts at these table points "
                    "(column ours_alt; e.g. an earlier split model's choices)")
    ap.add_argument("--sweep-hp", type=spec_list(hp_split, "auto,2"), default="auto",
                    help="BF16-tier split counts of --sweep (auto = planned)")
    ap.add_argument("--sweep-splits", type=split_spec, default=[],
                    help="LxB=hp+int2,...: --sweep times these points with these split counts instead of "
                         "--sweep-points x --sweep-hp x --sweep-scales (e.g. 131072x1=2+31,131072x1=10+23)")
    ap.add_argument("--probe", action="store_true", help="time the CUDA kernel beside its probes (--probe-modes)")
    ap.add_argument("--probe-variants", type=spec_list(variant_spec, "4,5"), default="4,5")
    ap.add_argument("--probe-modes", type=spec_list(probe_mode, "1,7"), default="1",
                    help="kernel probes of --probe: 1 = INT2 loads only, 6 = no code unpack (the MMAs take the raw "
                    "words), 7 = math only (no INT2 loads after the first ring fill), 8 = probe 1's loads as plain "
                    "loads into registers")
    ap.add_argument("--probe-points", type=spec_list(point, "131072x1"), default="131072x1,131072x32",
                    help="LxB points of --probe")
    ap.add_argument("--read-records", type=spec_list(point, "131072x1"), default=[],
                    help="LxB,...: the pool's records read as the decode kernel reads tiles, block-outer vs head-outer "
                    "(read_records)")
    ap.add_argument("--diag", type=spec_list(tagged_point(variant_spec), "131072x1:7"), default=[],
                    help="LxB:variant,... points of the fixed-cost diagnosis (bench_diag)")
    ap.add_argument("--capacity-plan", type=spec_list(tagged_point(count), "32768x1:131072"), default=[],
                    help="LxB:CAP,...: our kernel at LxB planned for CAP tokens (each sequence's own split count vs "
                    "every split) beside the plan for L (bench_capacity)")
    ap.add_argument("--read-floor", type=spec_list(point, "131072x1"), default=[],
                    help="LxB points: time a bare one-launch read of their INT2 bytes (the measured bound of issue 7)")
    ap.add_argument("--append-batches", type=spec_list(count, "1,256"), default="1,8,32,256")
    ap.add_argument("--alt-src", action="append", default=[],
                    help="the fused-rotation append timed again with the library built from this .cu (prebuilt into "
                         "$OSCARKV_KERNEL_CACHE: the cache is keyed by the source)")
    ap.add_argument("--append-pad", type=spec_list(lambda x: count(x, 0), "0,1"), default="0",
                    help="pages per row the append's page view is padded to, a list (0 = the step's own pages; 1 = a "
                    "graph-captured model step since 2026-12-05, 3 before)")
    ap.add_argument("--append-rotation", default="",
                    help="also time the append with R_K: 'fused' (in the kernel), 'gemm' (rotate_with_keys first), both")
    ap.add_argument("--early-reads", type=int, default=1, help="CudaDecodeConfig.early_reads for our kernel (as the "
                    "paged cache runs it; safe here: the previous kernel is always another decode call)")
    ap.add_argument("--pdl", type=int, default=0, help="programmatic dependent launch for our decode kernel "
                    "(default off: each timed call then pays its full launch latency); append is timed both ways")
    a = ap.parse_args()
    if not SMOKE and not torch.cuda.is_available():
        ap.exit(2, "bench_decode.py: this machine has no CUDA GPU, and the benchmarks time CUDA kernels; add --smoke "
                   "for the small CPU run of the script\n")
    try:
        check_merge_slices(a.merge_slices)
    except ValueError as e:
        ap.error(f"--merge-slices: {e}")
    D = a.head_dim
    EARLY = bool(a.early_reads)
    EVICT = not a.no_evict_first
    SEQUENTIAL = a.sequential
    SCALE = a.scale_dtype
    if SMOKE and (SCALE == "log8" or a.also_log8):  # the smoke run times the Triton fallback, which has no log8
        ap.error("--scale-dtype log8 / --also-log8 need the CUDA kernels (the Triton fallback reads float scales); "
                 "drop --smoke")
    CTA_ORDER = None if a.cta_order == "auto" else a.cta_order
    POLL_MERGE = a.poll_merge
    MERGE_SLICES = a.merge_slices
    HP_PER_WARP = a.hp_tiles_per_warp
    VARIANT = a.variant
    if not SMOKE:
        from oscarkv.kernels import cuda_ops

        cuda_ops.USE_PDL = bool(a.pdl)
        if a.variant is not None and not cuda_ops.variant_built(torch.bfloat16, D, a.variant, cuda_ops.SCALE_FORMATS[SCALE]):
            ap.exit(2, f"bench_decode.py: --variant {a.variant}: the kernel library has no such variant at head_dim {D} "
                       "(CudaDecodeConfig.variant lists them)\n")
    if SMOKE:
        HQ, HKV, SINK, RECENT = 4, 1, 16, 32
    t_start = time.time()
    dev = torch.device("cpu" if SMOKE else "cuda")
    commit = source_commit()
    res = dict(date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), argv=sys.argv, torch=torch.__version__,
               commit=commit, pdl=a.pdl, shape=dict(HQ=HQ, HKV=HKV, D=D, sink=SINK, recent=RECENT, block=BS))
    if not SMOKE:
        res["device"] = torch.cuda.get_device_name()

    def dump():
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)

    bw, forms = copy_bandwidth(dev)
    res["copy_bandwidth_Bps"], res["copy_forms_Bps"] = bw, forms
    log(f"copy bandwidth (read+write): {bw / 1e12:.3f} TB/s  {json.dumps({k: round(v / 1e12, 3) for k, v in forms.items()})}")
    if not SMOKE:
        res["accuracy"] = check_accuracy(dev)
    dump()
    if a.sweep and not SMOKE:
        variants = a.sweep_variants
        # (point, variant, split scale or None, bench_ours' split keywords): the explicit (point, split counts) of
        # --sweep-splits, else --sweep-points x variants x --sweep-hp x --sweep-scales
        jobs = [(pt, var, None, dict(splits=fixed)) for pt, fixed in a.sweep_splits for var in variants] or [
            (f"{L}x{B}", var, sc, dict(split_scale=sc, hp_splits=hp))
            for L, B in a.sweep_points for var in variants for hp in a.sweep_hp for sc in a.sweep_scales]
        sw = []
        for pt, var, sc, kw in jobs:
            L, B = (int(x) for x in pt.split("x"))
            t, _, ex = bench_ours(B, L, dev, "cuda", variants=(var,), **kw)
            sw.append(dict(L=L, B=B, **({} if sc is None else dict(split_scale=sc)), us=t * 1e6, **ex))
            label = ex["splits"] if sc is None else f"x{sc} ({ex['splits']})"
            log(f"sweep L={L} B={B} variant {var} splits {label}: {t * 1e6:.1f} us")
            torch.cuda.empty_cache()
        res["sweep"] = sw
        dump()
    if a.probe and not SMOKE:  # loads-only vs full kernel: is the INT2 loop bound by its loads or its math?
        pr = []
        for L, B in a.probe_points:
            for var in a.probe_variants:
                tf, nb, exf = bench_ours(B, L, dev, "cuda", variants=(var,))
                r = dict(L=L, B=B, variant=var, full_us=tf * 1e6, bytes=nb, full_frac_copy=nb / tf / bw,
                         splits=exf["splits"])
                msg = f"probe L={L} B={B} v{var}: full {tf * 1e6:.1f} us ({nb / tf / bw * 100:.0f}% copy)"
                for mode in a.probe_modes:
                    name = PROBES[mode]
                    tp, _, _ = bench_ours(B, L, dev, "cuda", variants=(var,), probe=mode)
                    r[f"{name}_us"], r[f"{name}_frac_copy"] = tp * 1e6, nb / tp / bw
                    msg += f", {name.replace('_', ' ')} {tp * 1e6:.1f} us ({nb / tp / bw * 100:.0f}% copy)"
                pr.append(r)
                log(msg)
                torch.cuda.empty_cache()
        res["probe"] = pr
        dump()

    def tagged_points(spec, label, name, fn):
        """Points (L, B, X) of a "LxB:X,..." option: fn(L, B, X) -> dict per point, logged (floats to 0.1) and kept as
        res[label]."""
        rows = []
        for L, B, x in spec:
            r = fn(L, B, x)
            rows.append(r)
            log(name + " " + json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()}))
            torch.cuda.empty_cache()
        res[label] = rows
        dump()

    if a.diag and not SMOKE:
        tagged_points(a.diag, "diag", "diag",
                      lambda L, B, var: dict(L=L, B=B, variant=var, **bench_diag(B, L, dev, var)))
    if a.capacity_plan and not SMOKE:
        tagged_points(a.capacity_plan, "capacity_plan", "capacity plan",
                      lambda L, B, cap: dict(L=L, B=B, capacity=int(cap), **bench_capacity(B, L, int(cap), dev)))
    if a.read_floor and not SMOKE:
        rf = []
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        for L, B in a.read_floor:
            nb = int2_bytes(B, L)
            t, info = read_floor(nb, dev, sms)
            rf.append(dict(L=L, B=B, bytes=nb, us=t * 1e6, TBps=nb / t / 1e12, frac_copy=nb / t / bw, **info))
            log(f"read floor L={L} B={B}: {nb / 1e6:.1f} MB in {t * 1e6:.1f} us = {nb / t / 1e12:.2f} TB/s "
                f"({nb / t / bw * 100:.0f}% copy) {json.dumps(info)}")
            torch.cuda.empty_cache()
        res["read_floor"] = rf
        dump()
    if a.read_records and not SMOKE:
        rr = []
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        for L, B in a.read_records:
            r = read_records(B, L, dev, sms)
            rr.append(r)
            log(f"read records L={L} B={B}: {r['bytes'] / 1e6:.1f} MB: block-outer {r['order0_us']:.1f} us "
                f"({r['bytes'] / r['order0_us'] / 1e6:.2f} TB/s, grid {r['order0_grid']}), head-outer {r['order1_us']:.1f} us "
                f"({r['bytes'] / r['order1_us'] / 1e6:.2f} TB/s, grid {r['order1_grid']}); one 8-warp CTA per SM: "
                f"block-outer {r['order0_one_cta_per_sm_us']:.1f} us, head-outer {r['order1_one_cta_per_sm_us']:.1f} us")
            torch.cuda.empty_cache()
        res["read_records"] = rr
        dump()
    fi = not a.no_flashinfer and not SMOKE
    if fi:
        try:
            import flashinfer  # noqa: F401

            res["flashinfer"] = flashinfer.__version__
        except Exception as e:
            log(f"flashinfer unavailable: {e}")
            fi = False
    contexts = a.contexts if a.contexts is not None else [700] if SMOKE else [4096, 16384, 32768, 65536, 131072]
    batches = a.batches if a.batches is not None else [1, 2] if SMOKE else [1, 8, 32, 128]
    alt = dict(a.alt_splits)
    table = []
    for L in contexts:
        for B in batches:
            if bf16_bytes(B, L) > a.max_bf16_gb * 1e9:
                continue
            row = dict(L=L, B=B)

            def run(name, f):
                try:
                    t, nb, *extra = f()
                    row[f"{name}_us"], row[f"{name}_bytes"], row[f"{name}_TBps"] = t * 1e6, nb, nb / t / 1e12
                    if extra and extra[0]:
                        row.update({f"{name}_{k}": v for k, v in extra[0].items()})
                except Exception as e:  # one failing method does not stop the table
                    row[f"{name}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                    log(f"  {name} L={L} B={B} failed: {row[f'{name}_error']}")
                if not SMOKE:
                    torch.cuda.empty_cache()

            run("ours", lambda: bench_ours(B, L, dev, "cuda") if not SMOKE else bench_ours(B, L, dev, "triton"))
            if a.also_log8 and not SMOKE and SCALE != "log8":
                run("ours_log8", lambda: with_scale("log8", lambda: bench_ours(B, L, dev, "cuda")))
            if f"{L}x{B}" in alt and not SMOKE:
                run("ours_alt", lambda: bench_ours(B, L, dev, "cuda", splits=alt[f"{L}x{B}"]))
            if not a.no_triton:
                run("triton", lambda: bench_ours(B, L, dev, "triton"))
            if not SMOKE:
                run("sdpa_flash", lambda: bench_sdpa(B, L, dev, "flash"))
                run("sdpa_cudnn", lambda: bench_sdpa(B, L, dev, "cudnn"))
            if fi:
                for name, dt in (("fi_bf16", torch.bfloat16), ("fi_fp8", torch.float8_e4m3fn)):
                    if len(a.flashinfer_configs) == 1:
                        run(name, lambda dt=dt: bench_flashinfer(B, L, dev, dt, a.flashinfer_configs[0]))
                        continue
                    # each configuration as <name>_<config>; <name> itself is the fastest of them
                    for c in a.flashinfer_configs:
                        run(f"{name}_{c}", lambda dt=dt, c=c: bench_flashinfer(B, L, dev, dt, c))
                    done = [c for c in a.flashinfer_configs if f"{name}_{c}_us" in row]
                    if done:
                        best = min(done, key=lambda c: row[f"{name}_{c}_us"])
                        row.update({f"{name}_{k}": row[f"{name}_{best}_{k}"] for k in ("us", "bytes", "TBps")})
                        row[f"{name}_config"] = best
                        log(f"  L={L} B={B} {name}: " + ", ".join(f"{c} {row[f'{name}_{c}_us']:.1f}" for c in done)
                            + f" us (best {best})")
            bf16s = [row[k] for k in ("sdpa_flash_us", "sdpa_cudnn_us", "fi_bf16_us") if k in row]
            for col, pre in (("ours", ""), ("ours_log8", "log8_")):  # our columns: fraction of copy, speedups
                if f"{col}_us" in row:
                    row[f"{col}_frac_copy"] = row[f"{col}_TBps"] * 1e12 / bw
                    if bf16s:
                        row[f"{pre}speedup_vs_best_bf16"] = min(bf16s) / row[f"{col}_us"]
                    if "fi_fp8_us" in row:
                        row[f"{pre}speedup_vs_fi_fp8"] = row["fi_fp8_us"] / row[f"{col}_us"]
            table.append(row)
            res["decode"] = table
            dump()
            f = lambda k: f"{row[k]:8.1f}" if k in row else "     n/a"  # noqa: E731
            log(f"L={L:>6} B={B:>3} ours {f('ours_us')} us ({row.get('ours_frac_copy', 0) * 100:3.0f}% copy, "
                f"splits {row.get('ours_splits')}, v{row.get('ours_variant')}) | alt {f('ours_alt_us')} "
                f"({row.get('ours_alt_splits')}) | triton {f('triton_us')} | flash {f('sdpa_flash_us')} | "
                f"cudnn {f('sdpa_cudnn_us')} | fi bf16 {f('fi_bf16_us')} | fi fp8 {f('fi_fp8_us')} | "
                f"x{row.get('speedup_vs_best_bf16', float('nan')):.2f} vs best bf16, "
                f"x{row.get('speedup_vs_fi_fp8', float('nan')):.2f} vs fp8 [{time.time() - t_start:.0f} s]"
                + (f" | log8 {f('ours_log8_us')} us ({row.get('ours_log8_frac_copy', 0) * 100:3.0f}% copy, "
                   f"x{row.get('log8_speedup_vs_best_bf16', float('nan')):.2f} vs best bf16, "
                   f"x{row.get('log8_speedup_vs_fi_fp8', float('nan')):.2f} vs fp8)" if a.also_log8 else ""))
    app = []
    if not (a.no_append or SMOKE):
        # launch floor: a graph of 16 tiny torch kernels (one elementwise op each)
        x = torch.zeros(16, device=dev)
        t = time_calls([lambda: x.add_(1.0)] * 16)
        res["launch_floor_us"] = t * 1e6
        log(f"launch floor (graph of 16 tiny elementwise kernels): {t * 1e6:.2f} us per kernel")
    pads = a.append_pad
    runs = [("cuda", 0, None, None, 0), ("cuda", 1, None, None, 0), ("triton", 0, None, None, 0)]
    runs += [("cuda", 1, r, None, pad) for r in a.append_rotation.split(",") if r for pad in pads]
    runs += [("cuda", 1, "fused", src, pad) for src in a.alt_src if "fused" in a.append_rotation for pad in pads]
    from oscarkv.kernels import cuda_ops  # (imported above only on a GPU)

    main_src = cuda_ops._SRC
    for B in ([] if a.no_append or SMOKE else a.append_batches):
        for backend, pdl, rot, src, pad in runs:
            if backend == "cuda":
                cuda_ops.USE_PDL = bool(pdl)
                if (src and Path(src) != cuda_ops._SRC) or (not src and cuda_ops._SRC != main_src):
                    cuda_ops._SRC, cuda_ops._LIB = Path(src) if src else main_src, None  # library of another source
            try:
                t, n_dem = bench_append(B, dev, backend, rotation=rot, pad=pad)
            except Exception as e:
                log(f"append {backend} B={B} rotation={rot} failed: {type(e).__name__}: {str(e)[:200]}")
                continue
            tag = (f" [{Path(src).name}]" if src else "") + (f" pad={pad}" if pad else "")
            app.append(dict(batch=B, backend=backend, pdl=pdl, rotation=rot, source=src, pad=pad, us_per_step=t * 1e6,
                            us_per_token=t * 1e6 / B, steps=16, demotion_steps=n_dem))
            log(f"append {backend:6s} pdl={pdl} rotation={rot}{tag} B={B:>3}: {t * 1e6:7.2f} us per step (amortized over 16 "
                f"steps, {n_dem} with a page demotion), {t * 1e6 / B:6.3f} us per token (one layer, {HKV} KV heads, K+V)")
    cuda_ops._SRC, cuda_ops._LIB = main_src, None
    if not SMOKE:
        cuda_ops.USE_PDL = bool(a.pdl)
    res["append"] = app
    dump()
    log(f"done [{time.time() - t_start:.0f} s]")


if __name__ == "__main__":
    main()
