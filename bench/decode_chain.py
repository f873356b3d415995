"""What an INT2 decode call costs between its neighbours in a model step (issues 7 and 8), on the GPU machine:

    python3 bench/decode_chain.py --points 131072x1,32768x1 --out $OUT/chain.json

Why: on the H100 (thirtieth session) the Qwen3-8B step at 128K batch 1 spends 1.540 ms per step in the decode
kernel (step_ablate: replay with the decode switched off), 42.8 us per layer, where bench_decode times the same
call at 36.5 us. bench_decode replays decode calls back to back, so with PDL each call's prologue and first loads
overlap the previous call's tail (its merge and epilogue); in the step the kernel before it is the append (R_K
fused) and the kernel after it the o_proj GEMM, which starts only when the decode call has ended.

Per point LxB (Qwen3-8B attention shape of bench_decode, the CUDA kernel with DecodePlan's default config and
early reads, as the paged cache runs it; R copies of the pool, o_proj-shaped weights and append pools, so that
every call reads HBM), each graph-replayed as bench_decode.time_calls does, time per layer:

* decode:  decode calls back to back (bench_decode's number), and again with PDL off (each call alone; and
           decode_gemv_no_pdl: the decode-then-GEMV pairs with the decode's PDL off);
* gemv:    y = o @ W_o (o_proj: [B, Hq*d] x [Hq*d, Hq*d], cuBLAS);  decode_gemv: decode then that GEMV;
* append:  the step's append with R_K fused (bench_decode.append_steps);  append_gemv, append_decode_gemv;
* tiny:    a one-element add, a kernel launched without PDL that does nothing else: tiny_decode, decode_tiny,
           gemv_tiny, append_decode (thirty-first session: which neighbour the chain's extra time belongs to).

Derived: the decode's cost after a GEMV (decode_gemv - gemv) and in the layer's chain (append_decode_gemv -
append_gemv), beside its back-to-back time; after and before a kernel that does nothing (tiny_decode - tiny,
decode_tiny - tiny), right after the append (append_decode - append); the GEMV's cost beside that kernel rather than
back to back (gemv_tiny - tiny). ``--alt-splits LxB=hp+int2,...`` times a point again with those decode split
counts. ``--smoke`` runs tiny sizes on CPU (Triton interpreter) to check the script itself.

Found (H100, thirty-first session, BENCHMARKS.md): in the layer the decode costs its PDL-off time less ~1.2 us that
the append before it hides, plus 1.4-2.2 us that appear only next to the GEMV; grids that leave the append room
beside the decode's CTAs do no better.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_decode as bd  # noqa: E402  (sets TRITON_INTERPRET under --smoke)

from oscarkv.fileio import source_commit  # noqa: E402
from oscarkv.kernels import DecodePlan, decode_attention  # noqa: E402


# derived costs, name -> (sequence, minus sequence): the decode's (or the GEMV's) share of a sequence of calls
DERIVED = {
    "decode_after_gemv": ("decode_gemv", "gemv"),
    "decode_in_chain": ("append_decode_gemv", "append_gemv"),
    "decode_after_tiny": ("tiny_decode", "tiny"),
    "decode_before_tiny": ("decode_tiny", "tiny"),
    "decode_after_append": ("append_decode", "append"),
    "gemv_beside_tiny": ("gemv_tiny", "tiny"),
    "decode_after_gemv_no_pdl": ("decode_gemv_no_pdl", "gemv"),  # CUDA only (PDL)
    "decode_in_chain_warm": ("warm_append_decode_gemv", "warm_append_gemv"),  # --warm-tiles
    # --prefetch-mb: what the chain gains from the weights' read beside the decode, against the same fork without it
    "chain_gain_prefetch": ("append_decode_nopf_gemv", "append_decode_pf_gemv"),
}


class LayerCalls:
    """One layer's kernels at point LxB (Qwen3-8B attention shape of bench_decode), each a list of zero-arg calls over
    R copies, so that every call reads HBM: ``dec`` the decode (CUDA kernel with DecodePlan's default config and
    early reads, as the paged cache runs it; ``splits`` = (hp, int2) fixes its split counts, ``variant`` its
    variant; Triton under --smoke), ``gemv`` y = o @ W_o (o_proj: [B, Hq*d] x [Hq*d, Hq*d], cuBLAS), ``apps`` the step's append with R_K
    fused (bench_decode.append_steps). Also bench/trace_decode.py's."""

    def __init__(self, B: int, L: int, dev: torch.device, splits: tuple[int, int] | None = None,
                 variant: int | None = None):
        backend = "triton" if bd.SMOKE else "cuda"
        self.nbytes = bd.int2_bytes(B, L)
        self.R = R = 2 if bd.SMOKE else max(3, bd.copies_for(self.nbytes))
        self.pool, self.metas = bd.make_mixed(B, L, R, dev, "logical" if bd.SMOKE else "tile16")
        hd = bd.HQ * bd.D
        q = torch.randn(B, bd.HQ, bd.D, device=dev, dtype=torch.bfloat16)
        out = torch.empty_like(q)
        # o_proj weights: R copies, >= 3 x 32 MB at the 8B shape, so each GEMV reads HBM as in the step
        self.ws = [(torch.randn(hd, hd, device=dev) * hd ** -0.5).bfloat16() for _ in range(R)]
        y = torch.empty(B, hd, device=dev, dtype=torch.bfloat16)
        self.apps, _ = bd.append_steps(B, dev, backend, steps=16, rotation="fused")
        pool, metas = self.pool, self.metas
        self.plans = []
        if backend == "cuda":
            hp, i2 = splits or (None, None)
            self.plans = [DecodePlan(B, bd.HQ, bd.HKV, bd.D, m, dev, torch.bfloat16, bd.ours_config(variant),
                                     n_hp_splits=hp, n_int2_splits=i2) for m in metas]
            self.dec = [lambda m=m, p=p: decode_attention(q, pool, m, plan=p, out=out)
                        for m, p in zip(metas, self.plans)]
        else:
            self.dec = [lambda m=m: decode_attention(q, pool, m, backend="triton", out=out) for m in metas]
        self.gemv = [lambda w=w: torch.mm(out.view(B, hd), w, out=y) for w in self.ws]
        self.n = max(R, len(self.apps))  # one layer per element of a sequence: copy i % R, append step i % 16
        self.warm = []

    def make_warm(self, tiles: int):
        """``warm``: per copy, a gather (index_select into a fixed buffer) of every page the decode reads first: the
        first ``tiles`` INT2 tiles (pages) of each of its INT2 splits, and the whole BF16 tier (sink + recent window),
        K and V with their scales and zeros, so that a decode right after it finds them in L2. Issue 8's question:
        would a prefetch of the next layer's first tiles during the MLP shorten the decode in the layer?"""
        n_int2, pool = self.plans[0].n_int2 if self.plans else 2, self.pool  # 2: the Triton smoke run's stand-in
        self.warm = []
        for m in self.metas:
            ni = m.int2_block_tables.shape[1]
            per = -(-ni // n_int2)
            first = sorted({j * per + k for j in range(n_int2) for k in range(tiles) if j * per + k < ni})
            ids2 = m.int2_block_tables[:, first].reshape(-1).long()
            idsh = m.hp_block_tables.reshape(-1).long()
            srcs = [(t, ids2) for t in (pool.k_codes, pool.v_codes, pool.k_scale, pool.v_scale, pool.k_zero,
                                        pool.v_zero)] + [(t, idsh) for t in (pool.k_hp, pool.v_hp)]
            bufs = [torch.empty((len(i),) + t.shape[1:], dtype=t.dtype, device=t.device) for t, i in srcs]
            self.warm.append(lambda srcs=srcs, bufs=bufs: [torch.index_select(t, 0, i, out=o)
                                                           for (t, i), o in zip(srcs, bufs)])

    def seq(self, *parts):
        """The calls of ``parts`` (lists above) in that order, one layer per element."""
        return [lambda i=i: [p[i % len(p)]() for p in parts] for i in range(self.n)]


def beside(main: list, side: list, dev: torch.device) -> list:
    """Calls that run ``main[i]`` and, on a second stream forked before it and joined after it, ``side[i]`` (in a
    captured graph: two branches between the previous call and the next)."""
    if dev.type != "cuda":
        return [lambda i=i: (main[i](), side[i % len(side)]()) for i in range(len(main))]
    st = torch.cuda.Stream(device=dev)

    def run(i):
        cur = torch.cuda.current_stream()
        st.wait_stream(cur)
        main[i]()
        with torch.cuda.stream(st):
            side[i % len(side)]()
        cur.wait_stream(st)

    return [lambda i=i: run(i) for i in range(len(main))]


def chain_point(B: int, L: int, dev: torch.device, splits: tuple[int, int] | None = None, warm: int = 0,
                prefetch_mb: float = 0.0) -> dict:
    """One point's sequences and derived costs; ``splits`` = (hp, int2) fixes the decode's split counts (else the
    plan's); ``warm`` > 0 also times the chain with the decode's first pages made L2-hot before the append
    (LayerCalls.make_warm: that many tiles per INT2 split); ``prefetch_mb`` > 0 the chain with a read of the first
    that many MB of the next GEMV's weights on a second stream beside the decode (append -> (decode | read) -> GEMV:
    can the GEMV's weights come into L2 while the decode's start and end leave HBM idle?)."""
    lc = LayerCalls(B, L, dev, splits)
    dec, gemv, apps, seq = lc.dec, lc.gemv, lc.apps, lc.seq
    z = torch.zeros(1, device=dev)
    tiny = [lambda: z.add_(1.0)]
    t = {}
    for name, parts in (("decode", (dec,)), ("gemv", (gemv,)), ("append", (apps,)), ("decode_gemv", (dec, gemv)),
                        ("append_gemv", (apps, gemv)), ("append_decode_gemv", (apps, dec, gemv)), ("tiny", (tiny,)),
                        ("tiny_decode", (tiny, dec)), ("decode_tiny", (dec, tiny)), ("gemv_tiny", (gemv, tiny)),
                        ("append_decode", (apps, dec))):
        t[name] = bd.time_calls(seq(*parts)) * 1e6
    if prefetch_mb:
        rows = max(1, min(lc.ws[0].shape[0], int(prefetch_mb * 2**20 / (lc.ws[0].shape[1] * lc.ws[0].element_size()))))
        acc = torch.empty(lc.ws[0].shape[1], device=dev, dtype=torch.float32)
        pf = [lambda w=w: torch.sum(w[:rows], dim=0, dtype=torch.float32, out=acc) for w in lc.ws]
        t["append_decode_pf_gemv"] = bd.time_calls(seq(apps, beside(dec, pf, dev), gemv)) * 1e6
        t["append_pf_gemv"] = bd.time_calls(seq(apps, pf, gemv)) * 1e6
        t["append_decode_nopf_gemv"] = bd.time_calls(seq(apps, beside(dec, [lambda: None], dev), gemv)) * 1e6
    if warm:
        lc.make_warm(warm)
        for name, parts in (("warm_append_gemv", (lc.warm, apps, gemv)),
                            ("warm_append_decode_gemv", (lc.warm, apps, dec, gemv))):
            t[name] = bd.time_calls(seq(*parts)) * 1e6
    if lc.plans:
        from oscarkv.kernels import cuda_ops

        pdl, cuda_ops.USE_PDL = cuda_ops.USE_PDL, False
        try:  # the decode alone: every call pays its launch, prologue and tail; and next to the GEMV that way
            t["decode_no_pdl"] = bd.time_calls(seq(dec)) * 1e6
            t["decode_gemv_no_pdl"] = bd.time_calls(seq(dec, gemv)) * 1e6
        finally:
            cuda_ops.USE_PDL = pdl
    r = dict(L=L, B=B, bytes=lc.nbytes, copies=lc.R, **{f"{k}_us": v for k, v in t.items()})
    r.update({f"{k}_us": t[a] - t[b] for k, (a, b) in DERIVED.items() if a in t})
    if lc.plans:
        r["splits"], r["variant"] = f"{lc.plans[0].n_hp}+{lc.plans[0].n_int2}", lc.plans[0].variant
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=bd.spec_list(bd.point, "131072x1,32768x1"), default="131072x1,32768x1",
                    help="LxB,... (700x2 with --smoke)")
    ap.add_argument("--out", default="decode_chain.json")
    ap.add_argument("--alt-splits", type=bd.split_spec, default=[],
                    help="LxB=hp+int2,...: each point of these also with these decode split counts (e.g. a batch-1 "
                    "grid that leaves the append's CTAs room beside the decode's)")
    ap.add_argument("--warm-tiles", type=int, default=0,
                    help="also time the chain with the decode's first N pages per INT2 split and its BF16 tier made "
                    "L2-hot before the append (decode_in_chain_warm)")
    ap.add_argument("--prefetch-mb", type=float, default=0.0,
                    help="also time the chain with a read of the first N MB of the o_proj weights on a second stream "
                    "beside the decode (chain_gain_prefetch)")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if not bd.SMOKE and not torch.cuda.is_available():
        ap.exit(2, "decode_chain.py: this machine has no CUDA GPU; add --smoke for the small CPU run of the script\n")
    if bd.SMOKE:
        bd.HQ, bd.HKV, bd.SINK, bd.RECENT = 4, 1, 16, 32
    dev = torch.device("cpu" if bd.SMOKE else "cuda")
    points = ["700x2"] if bd.SMOKE else [f"{L}x{B}" for L, B in a.points]
    res = dict(date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), argv=sys.argv, torch=torch.__version__,
               commit=source_commit(), device="cpu" if bd.SMOKE else torch.cuda.get_device_name(), points=[])
    runs = [(pt, None) for pt in points] + a.alt_splits
    for pt, splits in runs:
        L, B = (int(x) for x in pt.split("x"))
        r = chain_point(B, L, dev, splits, a.warm_tiles, a.prefetch_mb)
        res["points"].append(r)
        tag = f"L={L} B={B}" + (f" ({r['splits']})" if splits and "splits" in r else "")
        bd.log(f"chain {tag}: decode back to back {r['decode_us']:.1f} us"
               + (f" (PDL off {r['decode_no_pdl_us']:.1f})" if "decode_no_pdl_us" in r else "")
               + f", after a GEMV {r['decode_after_gemv_us']:.1f} (gemv {r['gemv_us']:.1f}), in append -> decode -> "
               f"GEMV {r['decode_in_chain_us']:.1f} (append {r['append_us']:.1f}, chain {r['append_decode_gemv_us']:.1f})")
        bd.log(f"chain {tag}: decode after a kernel that does nothing {r['decode_after_tiny_us']:.1f} us, before one "
               f"{r['decode_before_tiny_us']:.1f} (that kernel {r['tiny_us']:.1f}), after the append "
               f"{r['decode_after_append_us']:.1f}; GEMV beside it {r['gemv_beside_tiny_us']:.1f}"
               + (f"; with PDL off, decode after a GEMV {r['decode_after_gemv_no_pdl_us']:.1f}"
                  if "decode_after_gemv_no_pdl_us" in r else "")
               + (f"; in the chain with its first pages L2-hot {r['decode_in_chain_warm_us']:.1f} (warm, append, GEMV "
                  f"{r['warm_append_gemv_us']:.1f})" if "decode_in_chain_warm_us" in r else "")
               + (f"; chain with the weights' read beside the decode {r['append_decode_pf_gemv_us']:.1f} us against "
                  f"{r['append_decode_nopf_gemv_us']:.1f} with the same fork and no read (gain "
                  f"{r['chain_gain_prefetch_us']:.1f}; read, append, GEMV in series {r['append_pf_gemv_us']:.1f})"
                  if "chain_gain_prefetch_us" in r else ""))
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
        if not bd.SMOKE:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
