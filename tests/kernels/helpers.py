"""Small builders shared by the kernel tests."""

from dataclasses import replace

import torch

from oscarkv.kernels import MixedKVCache, MixedKVPool, write_kv
from oscarkv.quant import QuantConfig, log8_top


def build(lens, *, d=64, hkv=2, group=None, bs=4, sink=8, recent=16, chunks=1, seed=0, device="cpu",
          k_clip=0.96, v_clip=0.92, backend="torch", blocks=256, layout="logical", page=None, scale_dtype="float16"):
    """A cache holding ``lens[i]`` random rotated tokens per sequence, written in ``chunks`` appends
    (``scale_dtype="log8"``: scale_top of K and V from all the rows, ``quant.log8_top``).

    Returns (cache, pool, ids, rows) where rows[i] = (k, v) original bf16 rows of sequence i.
    """
    g = torch.Generator().manual_seed(seed)
    ids = list(range(len(lens)))
    rows = []
    for i in ids:
        # outlier-ish rows so clipping matters
        k = (torch.randn(lens[i], hkv, d, generator=g) * (1 + 4 * torch.rand(lens[i], hkv, d, generator=g) ** 8))
        v = torch.randn(lens[i], hkv, d, generator=g)
        rows.append((k.bfloat16().to(device), v.bfloat16().to(device)))
    kc = QuantConfig(group_size=group or d, clip_ratio=k_clip)
    vc = QuantConfig(group_size=group or d, clip_ratio=v_clip)
    if scale_dtype != "float16":
        tops = [log8_top(torch.cat([r[j] for r in rows]).float(), c) if scale_dtype == "log8" else None
                for j, c in enumerate((kc, vc))]
        kc, vc = (replace(c, scale_dtype=scale_dtype, scale_top=t) for c, t in zip((kc, vc), tops))
    pool = MixedKVPool.allocate(blocks, blocks, bs, hkv, d, kc, vc, device=device, layout=layout)
    cache = MixedKVCache(blocks, blocks, bs, sink=sink, recent=recent, page=page)
    for i in ids:
        cache.add(i)
    done = [0] * len(lens)
    for c in range(chunks):
        take = [((c + 1) * n) // chunks - done[i] for i, n in enumerate(lens)]
        plan = cache.plan_append(ids, take)
        k = torch.cat([rows[i][0][done[i] : done[i] + take[i]] for i in ids])
        v = torch.cat([rows[i][1][done[i] : done[i] + take[i]] for i in ids])
        write_kv(pool, k, v, plan, backend=backend)
        done = [a + b for a, b in zip(done, take)]
    return cache, pool, ids, rows


def rel_err(a, b):
    """The worst row's relative error: max over the first dimension (sequences, tokens) of |a_r - b_r| / |b_r|.
    Per row, so that a long sequence's small output (an average over many values) is not hidden behind the
    larger outputs of short rows in the same batch, as a norm over the whole batch would hide it."""
    a, b = a.double().reshape(a.shape[0], -1), b.double().reshape(b.shape[0], -1)
    return float(((a - b).norm(dim=1) / b.norm(dim=1).clamp_min(1e-30)).max())
