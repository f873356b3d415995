"""Prefill / chunked prefill attention over the paged cache (torch; decode is where speed matters).

Follows the spec's hybrid path (section 5.4): the cached past of each sequence is gathered from the
pools (INT2 rows dequantized, BF16 rows copied) and the chunk's own rotated K/V are used unquantized, so
within a chunk tokens see each other at full precision and quantization only affects earlier chunks.
The caller writes the chunk into the cache afterwards (``MixedKVCache.plan_append`` + ``write_kv``);
``meta`` must describe the cache *before* the chunk.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .paged import DecodeMeta, MixedKVPool
from .reference import gather_sequence


def prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: list[int] | torch.Tensor,
    pool: MixedKVPool,
    meta: DecodeMeta,
    sm_scale: float | None = None,
) -> torch.Tensor:
    """Causal chunk attention over [cached past | chunk].

    q ``[total, num_q_heads, head_dim]``, k/v ``[total, num_kv_heads, head_dim]`` (rotated, varlen packed),
    ``cu_seqlens`` ``[batch + 1]`` offsets into ``total`` (host list or tensor), ``meta`` addresses each
    sequence's past. Returns ``[total, num_q_heads, head_dim]`` in q's dtype (rotated V space).
    """
    cu = [int(x) for x in (cu_seqlens.tolist() if torch.is_tensor(cu_seqlens) else cu_seqlens)]
    sm_scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    # fp32 on CPU (bf16 CPU SDPA is slow and imprecise); the model dtype on GPU.
    cdt = torch.float32 if q.device.type == "cpu" else q.dtype
    out = torch.empty_like(q)
    for b in range(len(cu) - 1):
        s, e = cu[b], cu[b + 1]
        if e == s:
            continue
        kp, vp = gather_sequence(pool, meta, b, dtype=cdt)
        kk = torch.cat([kp, k[s:e].to(cdt)], 0)
        vv = torch.cat([vp, v[s:e].to(cdt)], 0)
        c, lp = e - s, kp.shape[0]
        # query i (position lp + i) sees the whole past and chunk keys 0..i
        mask = torch.ones(c, lp + c, dtype=torch.bool, device=q.device)
        mask[:, lp:] = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
        o = F.scaled_dot_product_attention(
            q[s:e].to(cdt).transpose(0, 1)[None], kk.transpose(0, 1)[None], vv.transpose(0, 1)[None],
            attn_mask=mask, scale=sm_scale, enable_gqa=True,
        )
        out[s:e] = o[0].transpose(0, 1).to(q.dtype)
    return out
