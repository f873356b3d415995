"""A miniature vLLM for tests: block allocation, prefix sharing, preemption, chunked prefill and decode,
driving ``core.build_step`` + ``LayerCompute.forward`` on vLLM-shaped tensors, and the dense reference
they must match. No vLLM import, so the GPU test can use it on the device machine.

The reference is the window rule written out directly on dense per-request K/V (quant.format's
fake_quantize for INT2-held rows, the step's own rows unquantized), independent of the paged code.
"""

from __future__ import annotations

import hashlib
import math

import torch

from ...quant import QuantConfig, fake_quantize, int2_len, storage_dtype
from ...rotation import hadamard, rotate
from .core import LayerCompute, OscarSettings, PageFormat, ShadowManager, build_step


def random_rotation(d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    if d & (d - 1) == 0:  # spread outliers like OSCAR's U.H (Hadamard exists for powers of two)
        q = q @ hadamard(d, torch.float64)
    return q.float()


class MiniVLLM:
    """Requests are token lists; K/V/Q of position p are a deterministic function of tokens[:p+1], so
    requests sharing a prefix produce identical rows, as in a real model."""

    def __init__(self, s: OscarSettings, *, num_blocks=64, block_size=16, hq=4, hkv=2, d=64,
                 dtype=torch.float32, device="cpu", shadow_cap=None, kernels="off", per_head=False, seed=0,
                 means=False, levels=None, layout="logical", scale_dtype="float16"):
        self.s, self.bs, self.hq, self.hkv, self.d = s, block_size, hq, hkv, d
        self.dtype, self.device = dtype, torch.device(device)
        r = int(per_head) * (hkv - 1) + 1
        rk = torch.stack([random_rotation(d, seed + 10 + i) for i in range(r)])
        rv = torch.stack([random_rotation(d, seed + 20 + i) for i in range(r)])
        self.scale = 1.0 / math.sqrt(d)
        if s.mode == "exact":
            fmt = PageFormat(d, "exact", dtype)
            self.k_cfg = self.v_cfg = None
        else:
            fmt = PageFormat(d, "oscar", dtype, 1, storage_dtype(scale_dtype))
            # log8: top 4 (scales up to 16, the format's 8 octaves below it) holds these rows' scales (~1-8,
            # the mean offsets included) as a calibrated file's tops would
            top = 4 if scale_dtype == "log8" else None
            # levels: Lloyd-Max stand-ins (None: uniform)
            self.k_cfg = QuantConfig(2, d, 0.96, scale_dtype, levels, top)
            self.v_cfg = QuantConfig(2, d, 0.92, scale_dtype, levels, top)
        self.k_mean = self.v_mean = None
        if means:  # calibrated-mean stand-ins: a large per-channel offset, as in Qwen2-family keys
            g = torch.Generator().manual_seed(seed + 30)
            self.k_mean = torch.randn(hkv, d, generator=g) * 4
            self.v_mean = torch.randn(hkv, d, generator=g)
        self.layer = LayerCompute(fmt, self.k_cfg, self.v_cfg, rk, rv, self.scale, kernels,
                                  k_mean=self.k_mean, v_mean=self.v_mean, layout=layout)
        self.rk, self.rv = rk, rv
        # vLLM hands the layer a view in the model dtype; the backend reinterprets the bytes
        nbytes = fmt.cell_bytes
        esz = torch.tensor([], dtype=dtype).element_size()
        assert nbytes % esz == 0
        self.kv = torch.zeros(num_blocks, hkv, block_size, nbytes // esz, dtype=dtype, device=self.device)
        self.mgr = None if s.mode == "exact" else ShadowManager(shadow_cap or 4 * num_blocks)
        self.free = list(range(1, num_blocks))  # block 0 = vLLM's null block; LRU order like vLLM's free queue
        self.ref = {}
        self.reqs: dict = {}
        self.want_kernel = kernels in ("torch", "triton", "auto")

    # ---------------------------------------------------------------- rows
    def rows(self, tokens, p):
        h = int(hashlib.sha256(repr(tuple(tokens[: p + 1])).encode()).hexdigest()[:8], 16)
        g = torch.Generator().manual_seed(h)
        k = torch.randn(self.hkv, self.d, generator=g)
        k[:, 3] *= 8.0  # an outlier channel, so clipping and rotation matter
        v = torch.randn(self.hkv, self.d, generator=g)
        if self.k_mean is not None:
            k, v = k + self.k_mean, v + self.v_mean
        q = torch.randn(self.hq, self.d, generator=g)
        return q.to(self.dtype), k.to(self.dtype), v.to(self.dtype)

    # ---------------------------------------------------------------- requests
    def add(self, rid, tokens, share_from=None, share_blocks=0, cached_blocks=(), int2_rows=()):
        """``share_from``: prefix-cache hit on the first ``share_blocks`` blocks of a running request;
        ``cached_blocks``: hit on freed-but-cached blocks. ``int2_rows``: past positions the reference
        must hold in INT2 (rows another request had already demoted, see the package docstring)."""
        blocks, done = [], 0
        if share_from is not None:
            blocks = list(self.reqs[share_from]["blocks"][:share_blocks])
            for b in blocks:
                self.ref[b] = self.ref.get(b, 1) + 1
        for b in cached_blocks:
            self.free.remove(b)
            self.ref[b] = 1
            blocks.append(b)
        done = len(blocks) * self.bs
        self.reqs[rid] = {"tokens": list(tokens), "blocks": blocks, "done": done, "int2_rows": set(int2_rows)}

    def remove(self, rid):
        for b in self.reqs.pop(rid)["blocks"]:
            self.ref[b] = self.ref.get(b, 1) - 1
            if self.ref[b] == 0:
                self.free.append(b)

    def preempt(self, rid):
        """vLLM's recompute preemption: free the blocks, start over from token 0 later."""
        tokens = self.reqs[rid]["tokens"]
        self.remove(rid)
        self.add(rid, tokens)

    def _alloc(self):
        b = self.free.pop(0)
        self.ref[b] = 1
        return b

    # ---------------------------------------------------------------- one engine step
    def step(self, sched: list[tuple[object, int]]):
        """Run one step with ``num_new`` tokens of each listed request; returns (outputs, expected) per rid."""
        bs = self.bs
        qs, ks, vs, slots, qsl, lens, tables = [], [], [], [], [0], [], []
        for rid, c in sched:
            r = self.reqs[rid]
            n0, n = r["done"], r["done"] + c
            while len(r["blocks"]) * bs < n:
                r["blocks"].append(self._alloc())
            for p in range(n0, n):
                q, k, v = self.rows(r["tokens"], p)
                qs.append(q)
                ks.append(k)
                vs.append(v)
                slots.append(r["blocks"][p // bs] * bs + p % bs)
            qsl.append(qsl[-1] + c)
            lens.append(n)
            tables.append(r["blocks"])
        mb = max(len(t) for t in tables)
        bt = torch.zeros(len(tables), mb, dtype=torch.int32)
        for i, t in enumerate(tables):
            bt[i, : len(t)] = torch.tensor(t, dtype=torch.int32)
        dev = self.device
        T = len(slots)
        plan = build_step(self.mgr, self.s, bs, torch.tensor(qsl, dtype=torch.int32), torch.tensor(lens, dtype=torch.int32),
                          bt.to(dev), torch.tensor(slots, dtype=torch.int64, device=dev), T, self.want_kernel)
        q, k, v = (torch.stack(x).to(dev) for x in (qs, ks, vs))
        out = torch.zeros(T, self.hq * self.d, dtype=self.dtype, device=dev)
        self.layer.forward(q, k, v, self.kv, plan, out)
        res = {}
        for i, (rid, c) in enumerate(sched):
            r = self.reqs[rid]
            res[rid] = (out[qsl[i] : qsl[i + 1]].view(c, self.hq, self.d).float().cpu(), self.expected(r["tokens"], r["done"], c, r["int2_rows"]))
            r["done"] += c
        return res

    # ---------------------------------------------------------------- reference
    def _rot(self, x, r, transpose=False):
        # x @ R per head through the package's rotate(), as the layer does: a plain x @ R here would round
        # the last bit differently (another float32 kernel), and an INT2 code sitting on a rounding boundary
        # then flips, which is not what this reference checks (tests/rotation checks rotate() itself)
        return rotate(x.float(), r, inverse=transpose, head_axis=-2)

    def expected(self, tokens, n0, c, quantized_rows=None):
        """Dense reference for the step that adds c tokens to a request holding n0 (window rule at n0 + c).
        ``quantized_rows``: extra past positions that are held in INT2 (a refilled shadow)."""
        n = n0 + c
        S, W, B = self.s.sink, self.s.recent, self.s.page
        i2 = int2_len(n, S, W, B)
        q, k, v = (torch.stack(x) for x in zip(*[self.rows(tokens, p) for p in range(n)]))
        if self.k_mean is not None:  # centering written out: (x - mu) @ R, output + mu_V @ R_V
            k, v = k - self.k_mean, v - self.v_mean
        qr, kr, vr = self._rot(q, self.rk), self._rot(k, self.rk), self._rot(v, self.rv)
        if self.s.mode != "exact":
            held = [p for p in range(n0) if (S <= p < S + i2) or (quantized_rows and p in quantized_rows)]
            if held:
                idx = torch.tensor(held)
                kr[idx] = fake_quantize(kr[idx], self.k_cfg)
                vr[idx] = fake_quantize(vr[idx], self.v_cfg)
        g = self.hq // self.hkv
        kk, vv = kr.repeat_interleave(g, 1), vr.repeat_interleave(g, 1)
        s = torch.einsum("qhd,khd->hqk", qr[n0:n], kk) * self.scale
        mask = torch.ones(c, n, dtype=torch.bool)
        mask[:, n0:] = torch.ones(c, c, dtype=torch.bool).tril()
        p_ = torch.softmax(s.masked_fill(~mask[None], float("-inf")), -1)
        o = torch.einsum("hqk,khd->qhd", p_, vv)
        if self.v_mean is not None:
            o = o + self._rot(self.v_mean[None], self.rv)[0].repeat_interleave(g, 0)[None]
        return self._rot(o, self.rv, transpose=True)
