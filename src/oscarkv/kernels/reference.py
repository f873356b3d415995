"""Torch reference ops over the paged pools: ground truth for the Triton kernels and the CPU fallback.

Built directly on ``oscarkv.quant.format`` (quantize / dequantize), so the kernels are checked against
the one format definition the rest of the project uses. Shapes as in ``paged.py``; q and outputs are
``[batch, num_q_heads, head_dim]`` with query head h reading KV head ``h // (num_q_heads // num_kv_heads)``.
"""

from __future__ import annotations

import math

import torch

from ..quant.format import QuantizedRows, dequantize, quantize
from .layout import blocks_store_logical, blocks_to_logical
from .paged import DecodeMeta, MixedKVPool, WritePlan


def _split(slots: torch.Tensor, block_size: int):
    return slots // block_size, slots % block_size


def read_int2(pool: MixedKVPool, slots: torch.Tensor, which: str) -> QuantizedRows:
    """Packed rows ``[n, num_kv_heads, ...]`` stored at int2 ``slots`` (logical format, any pool layout)."""
    b, o = _split(slots.long(), pool.block_size)
    if pool.layout != "logical":  # convert each touched block once
        ub, inv = torch.unique(b, return_inverse=True)
        codes, scale, zero = blocks_to_logical(pool, ub, which)
        return QuantizedRows(codes[inv, :, o], scale[inv, :, o], zero[inv, :, o], pool.head_dim, 2)
    codes, scale, zero = (getattr(pool, f"{which}_{n}") for n in ("codes", "scale", "zero"))
    return QuantizedRows(codes[b, :, o], scale[b, :, o], zero[b, :, o], pool.head_dim, 2)


def write_int2(pool: MixedKVPool, slots: torch.Tensor, which: str, rows: QuantizedRows) -> None:
    """Store packed rows at int2 ``slots`` (any pool layout; slots distinct). A tile16 block interleaves the
    bits of several tokens, so each touched block is read, updated and written back once, in logical form."""
    b, o = _split(slots.long(), pool.block_size)
    if pool.layout != "logical":
        ub, inv = torch.unique(b, return_inverse=True)
        codes, scale, zero = blocks_to_logical(pool, ub, which)
        codes[inv, :, o], scale[inv, :, o], zero[inv, :, o] = rows.codes, rows.scale, rows.zero
        blocks_store_logical(pool, ub, which, codes, scale, zero)
        return
    for n in ("codes", "scale", "zero"):
        getattr(pool, f"{which}_{n}")[b, :, o] = getattr(rows, n)


def write_kv_torch(pool: MixedKVPool, k: torch.Tensor, v: torch.Tensor, plan: WritePlan) -> None:
    """Reference of the fused quantize-and-append: ``k, v`` are ``[num_rows, num_kv_heads, head_dim]`` (rotated).

    Demotion runs first (it reads ring slots that the new rows may overwrite), then new rows are copied
    to hp slots or clipped + quantized into int2 slots (either pool layout: ``write_int2``).
    """
    dev = pool.k_hp.device
    plan = plan.to(dev)
    bs = pool.block_size
    d = plan.demote_src >= 0
    if d.any():
        src_b, src_o = _split(plan.demote_src[d], bs)
        for which, cfg in (("k", pool.k_cfg), ("v", pool.v_cfg)):
            rows = getattr(pool, f"{which}_hp")[src_b, :, src_o]
            write_int2(pool, plan.demote_dst[d], which, quantize(rows, cfg))
    h = plan.hp_slots >= 0
    if h.any():
        hb, ho = _split(plan.hp_slots[h], bs)
        pool.k_hp[hb, :, ho] = k[h].to(pool.k_hp.dtype)
        pool.v_hp[hb, :, ho] = v[h].to(pool.v_hp.dtype)
    q = plan.int2_slots >= 0
    if q.any():
        write_int2(pool, plan.int2_slots[q], "k", quantize(k[q], pool.k_cfg))
        write_int2(pool, plan.int2_slots[q], "v", quantize(v[q], pool.v_cfg))


def _table_slots(table: torch.Tensor, length: int, block_size: int) -> torch.Tensor:
    i = torch.arange(length, device=table.device)
    return table[i // block_size].long() * block_size + i % block_size


def gather_sequence(pool: MixedKVPool, meta: DecodeMeta, b: int, dtype=torch.float32):
    """Dense ``(K, V)`` ``[hp_len + int2_len, num_kv_heads, head_dim]`` of sequence b (int2 rows dequantized).

    Order is [hp tokens in hp-index order | int2 history]; attention over the cache does not depend on it.
    """
    bs = pool.block_size
    hl, ql = int(meta.hp_lens[b]), int(meta.int2_lens[b])
    hs = _table_slots(meta.hp_block_tables[b], hl, bs)
    qs = _table_slots(meta.int2_block_tables[b], ql, bs)
    hb, ho = _split(hs, bs)
    out = []
    for which, cfg in (("k", pool.k_cfg), ("v", pool.v_cfg)):
        hp = getattr(pool, f"{which}_hp")[hb, :, ho].to(dtype)
        q = dequantize(read_int2(pool, qs, which), cfg, dtype=dtype)
        out.append(torch.cat([hp, q], 0))
    return out[0], out[1]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float, mask: torch.Tensor | None = None,
           q_alt: torch.Tensor | None = None, alt: torch.Tensor | None = None):
    """softmax(q k^T * scale) v in q's dtype: q ``[n_q, Hq, d]``, k/v ``[n_k, Hkv, d]`` (GQA by head grouping).

    ``mask`` ``[n_q, n_k]`` bool (True = attend). Rows with no visible key give 0. Non-finite q, k or v
    propagate (NaN out), never turn into a plausible 0: only fully masked rows are zeroed, explicitly.
    ``q_alt`` (like q) with ``alt`` ``[n_k]`` bool: the keys where alt is True are scored with q_alt instead, in
    the same softmax (the CUDA kernel's int8 query on its INT2 history, ``int8_query``).
    """
    g = q.shape[1] // k.shape[1]
    if k.shape[0] == 0:
        return torch.zeros(q.shape, dtype=q.dtype, device=q.device)
    kk = k.to(q.dtype).repeat_interleave(g, dim=1)
    vv = v.to(q.dtype).repeat_interleave(g, dim=1)
    s = torch.einsum("qhd,khd->hqk", q, kk)
    if q_alt is not None:
        s = torch.where(alt, torch.einsum("qhd,khd->hqk", q_alt.to(q.dtype), kk), s)
    s = s * sm_scale
    if mask is not None:
        s = s.masked_fill(~mask[None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    if mask is not None:  # a row that sees no key: softmax of all -inf is NaN by construction -> 0
        p = p.masked_fill(~mask.any(-1)[None, :, None], 0.0)
    return torch.einsum("hqk,khd->qhd", p, vv)


def int8_query(q: torch.Tensor, sm_scale: float) -> torch.Tensor:
    """The query the CUDA kernel's INT2 tier attends with (cuda/int2_paged.cu, prep_q): per query head, x = q *
    sm_scale * log2(e) in fp32 rounded to int8 with step absmax(x) / 127; returned dequantized, in q's units
    (float32, same shape). The BF16 sink / recent tier keeps q as given.

    Bit for bit the kernel's fp32 steps, each one IEEE-rounded operation on float32 tensors: x = q * c with c
    = float32(sm_scale * log2(e)), inv = 127 / amax, q8 = rint(x * inv) (ties to even), step = amax / 127.
    (Not ``127.0 / amax`` with a Python scalar: torch computes a scalar divided by a tensor as a product with the
    reciprocal, one ulp off at times, and an element at exactly amax / 2 then rounds to 63 instead of the
    kernel's 64: a 1.7% output difference on a peaked softmax, seventeenth session.)"""
    c = torch.tensor(sm_scale * 1.4426950408889634, dtype=torch.float32, device=q.device)
    q8, step = int8_rows(q.float() * c)
    return q8 * step / c


def int8_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of ``x`` (float32, ``[..., d]``) rounded to int8 the CUDA kernel's way (prep_q): q8 = rint(x *
    (127 / amax)) with an IEEE float32 division (tensor by tensor: see ``int8_query``), ties to even; returns q8
    (float32 integers) and the step amax / 127 (``[..., 1]``, also an IEEE division). ``int8_query`` and the
    kernel's CPU emulation (tests/kernels/test_cuda_emulation.py) both round with it."""
    amax = x.abs().amax(-1, keepdim=True)
    levels = torch.full_like(amax, 127.0)
    inv = torch.where(amax > 0, levels / amax, torch.zeros_like(amax))
    return torch.round(x * inv), amax / levels


def decode_attention_torch(q: torch.Tensor, pool: MixedKVPool, meta: DecodeMeta, sm_scale: float | None = None,
                           compute_dtype=torch.float32, int8_int2_query: bool = False) -> torch.Tensor:
    """Full-precision softmax attention of single-token queries over the dequantized paged cache.

    q ``[batch, num_q_heads, head_dim]`` (already rotated by R_K); returns ``[batch, num_q_heads, head_dim]``
    in rotated V space, fp32 (``compute_dtype`` float64 gives the tight reference for tests).
    ``int8_int2_query``: the scores of the INT2 history use ``int8_query(q)``, as the CUDA kernel does (the
    reference its tests compare against); the sink / recent scores use q itself.
    """
    sm_scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    out = torch.empty(q.shape, dtype=compute_dtype, device=q.device)
    q8 = int8_query(q, sm_scale) if int8_int2_query else None
    for b in range(q.shape[0]):
        k, v = gather_sequence(pool, meta, b, dtype=compute_dtype)
        qb = q[b : b + 1].to(compute_dtype)
        # [hp | int2] keys (gather_sequence's order): with q8 the INT2 part is scored with it, one softmax
        int2 = torch.arange(k.shape[0], device=q.device) >= int(meta.hp_lens[b])
        out[b] = attend(qb, k, v, sm_scale, q_alt=None if q8 is None else q8[b : b + 1], alt=int2)[0]
    return out

