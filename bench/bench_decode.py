"""Decode-attention and append benchmarks for the paged INT2 cache (issue #3).

Run on the GPU machine from the repo root:

    PYTHONPATH=src python3 bench/bench_decode.py --out $OUT/bench.json
    PYTHONPATH=src python3 bench/bench_decode.py --fma --fma-sweep --no-append --no-bf16paged --out $OUT/bench.json

``--fma`` also times the CUDA-core INT2 kernel (``decode_attention(kernel="fma")``) at every point.

Shape: Qwen3-8B attention (32 query heads, 8 KV heads, head_dim 128), sink 64 + recent 256 in BF16,
the rest INT2 (group 128, fp16 scale/zero), block_size 16 with shuffled block tables.

Timing: every measured call sequence is captured in a CUDA graph and replayed; CUDA events around each
replay; median over replays, divided by the calls per graph. Each graph cycles over R copies of the
cache (R chosen so the bytes between two reads of the same copy are >= 3x the 60 MB L2), so numbers are
HBM numbers, not L2 numbers. Launch overhead inside a graph is part of the time (as in a graph-captured
decode loop). ``--smoke`` runs tiny sizes on CPU (interpreter) to check the script itself.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

SMOKE = "--smoke" in sys.argv
if SMOKE:
    os.environ.setdefault("TRITON_INTERPRET", "1")

from oscarkv.kernels import DecodeMeta, MixedKVPool, WritePlan, decode_attention, write_kv  # noqa: E402
from oscarkv.quant import QuantConfig  # noqa: E402

HQ, HKV, D = 32, 8, 128
SINK, RECENT, BS = 64, 256, 16
L2_BYTES = 60 << 20
if SMOKE:  # the interpreter runs every program in Python: shrink everything
    HQ, HKV, D, SINK, RECENT = 4, 1, 64, 16, 32


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------------------------- timing
def time_calls(fns, reps=30, warmup=3):
    """Median seconds per call of the sequence ``fns`` (a list of zero-arg callables), graph-replayed."""
    if SMOKE:
        t = time.perf_counter()
        for f in fns:
            f()
        return (time.perf_counter() - t) / len(fns)
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
    for dt in (torch.uint8, torch.bfloat16):
        x = torch.empty(n // torch.empty(0, dtype=dt).element_size(), dtype=dt, device=dev)
        y = torch.empty_like(x)
        x.view(torch.uint8).random_(0, 255)
        out[f"copy_{dt}_graph"] = 2 * n / time_calls([lambda: y.copy_(x)], reps=20)
        if not SMOKE:  # plain events, no graph
            ts = []
            for _ in range(10):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                y.copy_(x)
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b) / 1e3)
            out[f"copy_{dt}_events"] = 2 * n / statistics.median(ts)
        del x, y
    return max(out.values()), out


# --------------------------------------------------------------------------------------------- caches
def copies_for(nbytes):
    if SMOKE:
        return 2
    return max(1, math.ceil(3 * L2_BYTES / max(nbytes, 1)))


def int2_bytes(B, L, hp=True, ng=1, sbytes=2):
    hp_len = min(L, SINK + RECENT)
    q_len = L - hp_len
    return B * HKV * (q_len * (2 * (D // 4) + 2 * 2 * ng * sbytes) + hp_len * 2 * D * 2)


def bf16_bytes(B, L):
    return B * HKV * L * 2 * D * 2


def make_mixed(B, L, R, dev, bf16_only=False):
    """Pool with R independent copies of B sequences of L tokens (random contents), and R metas."""
    hp_len = L if bf16_only else min(L, SINK + RECENT)
    q_len = L - hp_len
    nhp, nq = -(-hp_len // BS), -(-q_len // BS)
    cfg = QuantConfig(bits=2, group_size=128, clip_ratio=0.96, scale_dtype="float16")
    vcfg = QuantConfig(bits=2, group_size=128, clip_ratio=0.92, scale_dtype="float16")
    pool = MixedKVPool.allocate(R * B * nq + 1, R * B * nhp + 1, BS, HKV, D, cfg, vcfg, device=dev)
    for t in (pool.k_codes, pool.v_codes):
        t.random_(0, 256)
    for t in (pool.k_scale, pool.v_scale):
        t.uniform_(0.05, 0.5)
    for t in (pool.k_zero, pool.v_zero):
        t.uniform_(-1.0, 0.0)
    for t in (pool.k_hp, pool.v_hp):
        t.normal_()
    gen = torch.Generator(device="cpu").manual_seed(0)
    qperm = torch.randperm(R * B * nq, generator=gen) + 1  # shuffled: realistic fragmentation
    hperm = torch.randperm(R * B * nhp, generator=gen) + 1
    metas = []
    for r in range(R):
        qb = qperm[r * B * nq : (r + 1) * B * nq].view(B, max(nq, 0)).int() if nq else torch.zeros(B, 1, dtype=torch.int32)
        hb = hperm[r * B * nhp : (r + 1) * B * nhp].view(B, nhp).int()
        metas.append(DecodeMeta(hb.to(dev), torch.full((B,), hp_len, dtype=torch.int32, device=dev),
                                qb.to(dev), torch.full((B,), q_len, dtype=torch.int32, device=dev), hp_len, q_len))
    return pool, metas


# ------------------------------------------------------------------------------------------- methods
def bench_int2(B, L, dev, configs, bf16_only=False):
    nbytes = bf16_bytes(B, L) if bf16_only else int2_bytes(B, L)
    R = copies_for(nbytes)
    pool, metas = make_mixed(B, L, R, dev, bf16_only)
    q = torch.randn(B, HQ, D, device=dev, dtype=torch.bfloat16)
    best = None
    for cfg in configs:
        try:
            t = time_calls([lambda m=m: decode_attention(q, pool, m, backend="triton", **cfg) for m in metas])
        except Exception as e:  # a config that does not compile / fit is skipped, not fatal
            log(f"  config {cfg} failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        if best is None or t < best[0]:
            best = (t, cfg)
    del pool, metas
    if best is None:  # every config failed: report NaN instead of stopping the whole run
        return float("nan"), None, nbytes
    return best[0], best[1], nbytes


def bench_sdpa(B, L, dev):
    """BF16 flash SDPA. GQA decode is fed as MHA over KV heads with the g query heads of each KV head
    as g query rows (no mask), which is exactly GQA decode and lets the flash kernel read K/V once."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    nbytes = bf16_bytes(B, L)
    R = copies_for(nbytes)
    kv = [(torch.randn(B, HKV, L, D, device=dev, dtype=torch.bfloat16), torch.randn(B, HKV, L, D, device=dev, dtype=torch.bfloat16)) for _ in range(R)]
    q = torch.randn(B, HKV, HQ // HKV, D, device=dev, dtype=torch.bfloat16)
    backends = [SDPBackend.MATH] if SMOKE else [SDPBackend.FLASH_ATTENTION]

    def call(k, v):
        with sdpa_kernel(backends):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    t = time_calls([lambda k=k, v=v: call(k, v) for k, v in kv])
    del kv
    return t, nbytes


def bench_append(B, dev, rows_mode):
    """Per-call time of write_kv: 'decode' = B rows, each into the ring with one demotion (fused);
    'prefill' = B rows straight into INT2 (clip + quantize + pack)."""
    cfg = QuantConfig(clip_ratio=0.96)
    vcfg = QuantConfig(clip_ratio=0.92)
    nb = -(-B // BS) * 4 + 2
    pool = MixedKVPool.allocate(nb, nb, BS, HKV, D, cfg, vcfg, device=dev)
    pool.k_hp.normal_()
    pool.v_hp.normal_()
    k = torch.randn(B, HKV, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(B, HKV, D, device=dev, dtype=torch.bfloat16)
    slots = torch.arange(B, device=dev) + BS
    none = torch.full((B,), -1, dtype=torch.int64, device=dev)
    if rows_mode == "decode":
        plan = WritePlan(slots, none, slots, slots, True)  # demote the ring row, then overwrite it
    else:
        plan = WritePlan(none, slots, none, none, True)
    t = time_calls([lambda: write_kv(pool, k, v, plan, backend="triton")])
    return t


def check_accuracy(dev):
    """INT2 kernel vs the torch reference (fp64) at a bench-like shape with real quantized data."""
    from oscarkv.kernels import MixedKVCache
    from oscarkv.kernels.reference import decode_attention_torch

    out = []
    for L, B in ([(700, 2)] if SMOKE else [(32768, 1), (5000, 4)]):
        cfg, vcfg = QuantConfig(clip_ratio=0.96), QuantConfig(clip_ratio=0.92)
        nb = B * (L // BS + 2) + 2
        pool = MixedKVPool.allocate(nb, nb, BS, HKV, D, cfg, vcfg, device=dev)
        cache = MixedKVCache(nb, nb, BS, SINK, RECENT)
        ids = list(range(B))
        lens = [L - 37 * i for i in ids]
        for i in ids:
            cache.add(i)
        for i in ids:  # prefill in one write (direct INT2 for history), then 5 decode steps (demotion)
            plan = cache.plan_append([i], [lens[i] - 5])
            write_kv(pool, torch.randn(lens[i] - 5, HKV, D, device=dev).bfloat16(), torch.randn(lens[i] - 5, HKV, D, device=dev).bfloat16(), plan)
        for _ in range(5):
            write_kv(pool, torch.randn(B, HKV, D, device=dev).bfloat16(), torch.randn(B, HKV, D, device=dev).bfloat16(), cache.plan_append(ids, [1] * B))
        meta = cache.metadata(ids, device=dev)
        q = torch.randn(B, HQ, D, device=dev).bfloat16() * 3
        ref = decode_attention_torch(q, pool, meta, compute_dtype=torch.float64)
        for kernel in ("mma", "fma"):
            try:
                o = decode_attention(q, pool, meta, backend="triton", kernel=kernel)
            except Exception as e:
                log(f"accuracy {kernel}: failed: {type(e).__name__}: {str(e)[:300]}")
                continue
            rel = float((o.double() - ref).norm() / ref.norm())
            mx = float((o.double() - ref).abs().max())
            out.append(dict(L=L, B=B, kernel=kernel, rel_err=rel, max_abs_err=mx, ref_rms=float(ref.pow(2).mean().sqrt())))
            log(f"accuracy {kernel} L={L} B={B}: rel {rel:.2e} max|err| {mx:.2e}")
    return out


# ---------------------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_results.json")
    ap.add_argument("--contexts", default="4096,16384,32768,65536,131072")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--sweep", action="store_true", help="sweep kernel configs first (else use defaults)")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--fma", action="store_true", help="also time the CUDA-core INT2 kernel (kernel='fma')")
    ap.add_argument("--fma-sweep", action="store_true", help="sweep fma configs first; the best 3 are tried per point")
    ap.add_argument("--mma-configs", default="default", help="'default' (2 best of the 2026-12-02 run-3 sweep) or 'one'")
    ap.add_argument("--no-bf16paged", action="store_true")
    ap.add_argument("--no-append", action="store_true")
    a = ap.parse_args()
    t_start = time.time()
    dev = torch.device("cpu" if SMOKE else "cuda")
    res = dict(date=time.strftime("%Y-%m-%d"), argv=sys.argv, torch=torch.__version__)
    import triton

    res["triton"] = triton.__version__
    if not SMOKE:
        res["device"] = torch.cuda.get_device_name()
    contexts = [int(x) for x in a.contexts.split(",")]
    batches = [int(x) for x in a.batches.split(",")]

    def dump():
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)

    bw, forms = copy_bandwidth(dev)
    res["copy_bandwidth_Bps"] = bw
    res["copy_forms_Bps"] = forms
    log("copy forms (TB/s): " + ", ".join(f"{k} {v / 1e12:.3f}" for k, v in forms.items()))
    log(f"copy bandwidth (read+write): {bw / 1e12:.3f} TB/s")
    res["accuracy"] = check_accuracy(dev)
    dump()

    default = dict(kernel="mma", block_n=128, num_warps=4, num_stages=3, ctas_per_sm=4, asm_unpack=True, prefetch=True)
    configs = [default]
    if a.mma_configs == "default" and not a.sweep:
        configs.append(dict(default, ctas_per_sm=2))
    fma_configs = [dict(kernel="fma", block_n=16, num_warps=4, num_stages=4, ctas_per_sm=8)]
    if a.fma and a.fma_sweep:
        fgrid = [dict(kernel="fma", block_n=bn, num_warps=w, num_stages=st, ctas_per_sm=c, rows=r)
                 for bn, w, st, c, r in ((16, 4, 4, 4, 1), (16, 4, 4, 8, 1), (16, 4, 4, 16, 1), (16, 4, 1, 8, 1),
                                         (16, 4, 8, 8, 1), (4, 1, 4, 32, 1), (8, 2, 4, 16, 1),
                                         (32, 8, 4, 8, 1), (16, 4, 4, 8, 2))]
        fgrid.append(dict(kernel="fma", block_n=16, num_warps=4, num_stages=4, ctas_per_sm=8, magic=True))
        fgrid.append(dict(kernel="fma", block_n=16, num_warps=4, num_stages=4, ctas_per_sm=8, separate_hp=False))
        if SMOKE:
            fgrid = [dict(kernel="fma", block_n=4, num_warps=1, num_stages=2, ctas_per_sm=2)]
        fsweep = []
        for L, B in ([(700, 1)] if SMOKE else [(32768, 1), (131072, 1), (32768, 32)]):
            rows = []
            for cfg in fgrid:
                t, _, nb = bench_int2(B, L, dev, [cfg])
                rows.append((t, cfg))
                fsweep.append(dict(L=L, B=B, cfg=cfg, us=t * 1e6, achieved_Bps=nb / t))
            rows.sort(key=lambda r: r[0])
            log(f"fma sweep L={L} B={B}: best {rows[0][0] * 1e6:.1f} us {rows[0][1]}; worst {rows[-1][0] * 1e6:.1f} us "
                f"[{time.time() - t_start:.0f} s]")
            for _, cfg in rows[:2]:
                if cfg not in fma_configs:
                    fma_configs.append(cfg)
        res["fma_sweep"] = fsweep
        dump()
    res["fma_configs_tried_per_point"] = fma_configs
    if a.sweep:
        sweep = []
        grid = [dict(kernel="mma", block_n=bn, num_warps=w, num_stages=s, ctas_per_sm=c, asm_unpack=True, prefetch=True)
                for bn in (64, 128, 256) for w in (4, 8) for s in (1, 3) for c in (2, 4, 8)]
        grid += [dict(kernel="mma", block_n=128, num_warps=4, num_stages=s, ctas_per_sm=c, asm_unpack=False, prefetch=True)
                 for s in (1, 3) for c in (2, 4)]
        grid += [dict(kernel="mma", block_n=128, num_warps=4, num_stages=3, ctas_per_sm=2, asm_unpack=True, prefetch=False)]
        if SMOKE:
            grid = grid[:2]
        for L, B in ([(700, 1)] if SMOKE else [(32768, 1), (131072, 1), (32768, 32)]):
            rows = []
            for cfg in grid:
                t, _, nb = bench_int2(B, L, dev, [cfg])
                rows.append((t, cfg))
                sweep.append(dict(L=L, B=B, cfg=cfg, us=t * 1e6, achieved_Bps=nb / t))
            rows.sort(key=lambda r: r[0])
            log(f"sweep L={L} B={B}: best {rows[0][0] * 1e6:.1f} us {rows[0][1]}; worst {rows[-1][0] * 1e6:.1f} us")
            for _, cfg in rows[:3]:
                if cfg not in configs:
                    configs.append(cfg)
        res["sweep"] = sweep
        dump()
    res["configs_tried_per_point"] = configs
    bf16_cfgs = [dict(block_n_hp=bn, num_warps=w, num_stages=s, ctas_per_sm=c)
                 for bn, w, s, c in ((64, 4, 3, 2), (64, 8, 3, 4), (32, 4, 3, 4), (128, 8, 3, 2))]
    if SMOKE:
        bf16_cfgs = bf16_cfgs[:1]
        contexts, batches = [700], [1, 2]
    table = []
    for L in contexts:
        for B in batches:
            row = dict(L=L, B=B)
            try:
                t, cfg, nb = bench_int2(B, L, dev, configs)
                row.update(int2_us=t * 1e6, int2_cfg=cfg, int2_bytes=nb, int2_Bps=nb / t, int2_frac_copy=nb / t / bw)
                if a.fma:
                    tf_, cfgf, _ = bench_int2(B, L, dev, fma_configs)
                    row.update(fma_us=tf_ * 1e6, fma_cfg=cfgf, fma_Bps=nb / tf_, fma_frac_copy=nb / tf_ / bw,
                               fma_speedup_vs_mma=t / tf_)
                t2, nb2 = bench_sdpa(B, L, dev)
                row.update(sdpa_us=t2 * 1e6, bf16_bytes=nb2, sdpa_Bps=nb2 / t2, speedup_vs_sdpa=t2 / t)
                if a.fma:
                    row.update(fma_speedup_vs_sdpa=t2 / row["fma_us"] * 1e6)
                if not a.no_bf16paged:
                    t3, cfg3, _ = bench_int2(B, L, dev, bf16_cfgs, bf16_only=True)
                    row.update(bf16paged_us=t3 * 1e6, bf16paged_cfg=cfg3, bf16paged_Bps=nb2 / t3, speedup_vs_bf16paged=t3 / t)
            except torch.cuda.OutOfMemoryError as e:
                row["error"] = f"OOM: {e}"[:200]
            torch.cuda.empty_cache() if not SMOKE else None
            table.append(row)
            res["decode"] = table
            dump()
            log(
                f"L={L:>6} B={B:>2} int2 {row.get('int2_us', float('nan')):8.1f} us "
                f"({row.get('int2_Bps', 0) / 1e12:.2f} TB/s, {row.get('int2_frac_copy', 0) * 100:4.0f}% copy) | "
                f"sdpa {row.get('sdpa_us', float('nan')):8.1f} us x{row.get('speedup_vs_sdpa', float('nan')):.2f} | "
                f"bf16 paged {row.get('bf16paged_us', float('nan')):8.1f} us x{row.get('speedup_vs_bf16paged', float('nan')):.2f}"
                + (f" | fma {row.get('fma_us', float('nan')):8.1f} us ({row.get('fma_frac_copy', 0) * 100:4.0f}% copy) "
                   f"x{row.get('fma_speedup_vs_sdpa', float('nan')):.2f} vs sdpa, x{row.get('fma_speedup_vs_mma', float('nan')):.2f} vs mma"
                   if a.fma else "") + f" [{time.time() - t_start:.0f} s]"
            )
    app = []
    for B in ([] if a.no_append else [1, 4] if SMOKE else [1, 8, 32, 256]):
        for mode in ("decode", "prefill"):
            t = bench_append(B, dev, mode)
            app.append(dict(rows=B, mode=mode, us_per_call=t * 1e6, us_per_token=t * 1e6 / B))
            log(f"append {mode:7s} rows={B:>3}: {t * 1e6:7.2f} us/call, {t * 1e6 / B:6.3f} us/token (all {HKV} heads, K+V)")
    res["append"] = app
    dump()
    log("done")


if __name__ == "__main__":
    main()
