"""Triton fused clip + quantize + pack + append, and demotion of recent BF16 rows into INT2.

One program per (row, KV head) handles K and V. A row of head_dim values is held as a [4, head_dim/4]
tile whose row p is bit plane p of the quartered packing (dims p*d/4 ... (p+1)*d/4 - 1), so packing is
a shift-and-sum over the tile's first axis and no permutation is needed (the spec notes that permuting
a uint8 tile gave wrong lanes on their build; we never permute).

Arithmetic mirrors ``oscarkv.quant.format.quantize`` step for step (fp32, scale and zero rounded to the
storage dtype before coding, IEEE-rounded divisions via ``div_rn``), so codes match the reference bit for
bit. Clipping is exact: tau = sort(|x|)[k] is found as the smallest |x_i| with at least k + 1 values
<= it (a d x d comparison count), not the spec's 7-step bisection, so demoted and prefilled rows are
clipped identically (the spec's two paths differ; see spec section 2).

A tile16 pool (the CUDA decode kernel's layout, kernels/layout.py) is written row by row too: each code goes to
its 2-bit field of the block (``layout.field_index``) by an atomic clear and an atomic set of its 32-bit word,
since a word of V codes holds codes of two tokens that other programs of the same launch may be writing; scale
and zero go to the token's place in the block's order. (The CUDA append writes whole pages of a tile16 pool;
this path serves row-by-row writers such as the vLLM backend's tile16 pages.)
"""

from __future__ import annotations

from functools import lru_cache

import torch
import triton
import triton.language as tl

from .layout import SCALE_INV, field_index
from .paged import kernel_clip_index


@triton.jit
def _quantize_row(x, CLIP_IDX: tl.constexpr, D: tl.constexpr, D4: tl.constexpr, NG: tl.constexpr, SDT: tl.constexpr):
    """x: [4, D4] fp32 -> (codes [4, D4] int32, scale [NG] SDT, zero [NG] SDT)."""
    # Non-finite input must not come out as plausible codes (min/max/clip drop NaN): flag each group
    # here, before clipping, and store a NaN scale for it, so its dequantized rows are NaN (issue 11).
    bad_el = ((x != x) | (tl.abs(x) == float("inf"))).to(tl.float32)
    bad = tl.max(tl.reshape(tl.max(bad_el, axis=1), (NG, 4 // NG)), axis=1) > 0
    if CLIP_IDX >= 0:
        a = tl.reshape(tl.abs(x), (D,))
        cnt = tl.sum((a[None, :] <= a[:, None]).to(tl.int32), axis=1)
        tau = tl.min(tl.where(cnt >= CLIP_IDX + 1, a, float("inf")), axis=0)
        x = tl.maximum(tl.minimum(x, tau), -tau)
    # per-plane min/max, then per group (a group spans 4 // NG whole planes)
    lo = tl.min(tl.reshape(tl.min(x, axis=1), (NG, 4 // NG)), axis=1)
    hi = tl.max(tl.reshape(tl.max(x, axis=1), (NG, 4 // NG)), axis=1)
    three = tl.full((NG,), 3.0, tl.float32)
    scale = tl.math.div_rn(tl.maximum(hi - lo, 1e-8), three)
    scale = tl.where(bad, float("nan"), scale).to(SDT)
    zero = lo.to(SDT)
    sp = tl.reshape(tl.broadcast_to(tl.reshape(scale.to(tl.float32), (NG, 1)), (NG, 4 // NG)), (4,))
    zp = tl.reshape(tl.broadcast_to(tl.reshape(zero.to(tl.float32), (NG, 1)), (NG, 4 // NG)), (4,))
    u = tl.math.div_rn(x - zp[:, None], tl.broadcast_to(sp[:, None], (4, D4)))
    code = tl.minimum(tl.maximum(tl.floor(u + 0.5), 0.0), 3.0).to(tl.int32)
    return code, scale, zero


@triton.jit
def _store_int2(x, slot, h, C, S, Z, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb, FIELD, SPOS,
                CLIP_IDX: tl.constexpr, D: tl.constexpr, D4: tl.constexpr, NG: tl.constexpr, BS: tl.constexpr,
                TILE16: tl.constexpr):
    code, scale, zero = _quantize_row(x, CLIP_IDX, D, D4, NG, S.dtype.element_ty)
    blk = slot // BS
    off = slot % BS
    g = tl.arange(0, NG)
    if TILE16:
        # C: the block's codes as int32 words (s_cn / s_ch in words); each code goes to its 2-bit field
        # (layout.field_index), cleared then set by atomics: a V word holds codes of two tokens, which other
        # programs of this launch may write at the same time (their bits are disjoint)
        tile = tl.arange(0, 4)[:, None] * D4 + tl.arange(0, D4)[None, :]
        f = tl.load(FIELD + off * D + tile)
        word = C + blk * s_cn + h * s_ch + (f >> 4)
        shift = (f & 15) * 2
        tl.atomic_and(word, ~(3 << shift))
        tl.atomic_or(word, code << shift)
        sp = tl.load(SPOS + off)  # the token's index in the block's scale / zero order
        tl.store(S + blk * s_sn + h * s_sh + sp * s_sb + g, scale)
        tl.store(Z + blk * s_sn + h * s_sh + sp * s_sb + g, zero)
    else:
        shift = (tl.arange(0, 4) * 2)[:, None]
        packed = tl.sum(code << shift, axis=0)  # disjoint bit fields: sum == bitwise or
        tl.store(C + blk * s_cn + h * s_ch + off * s_cb + tl.arange(0, D4), packed.to(tl.uint8))
        tl.store(S + blk * s_sn + h * s_sh + off * s_sb + g, scale)
        tl.store(Z + blk * s_sn + h * s_sh + off * s_sb + g, zero)


@triton.jit
def write_kv_kernel(
    K, V, s_kr, s_kh, s_vr, s_vh,  # new rows [rows, Hkv, D]
    HP_SLOT, I2_SLOT, DEM_SRC, DEM_DST,  # [rows] int64, -1 = none
    KC, KS, KZ, VC, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb,  # int2 pools
    KH, VH, s_hn, s_hh, s_hb,  # hp pools
    FK, FV, SPK, SPV,  # tile16: field of each (token, dim), stored index of each token's scale / zero
    CLIP_K: tl.constexpr, CLIP_V: tl.constexpr,
    D: tl.constexpr, D4: tl.constexpr, NG: tl.constexpr, BS: tl.constexpr,
    DO_DEMOTE: tl.constexpr, DO_WRITE: tl.constexpr, TILE16: tl.constexpr,
):
    r = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    tile = tl.arange(0, 4)[:, None] * D4 + tl.arange(0, D4)[None, :]  # [4, D4] dims in plane order
    if DO_DEMOTE:
        src = tl.load(DEM_SRC + r)
        if src >= 0:
            dst = tl.load(DEM_DST + r)
            hoff = (src // BS) * s_hn + h * s_hh + (src % BS) * s_hb
            xk = tl.load(KH + hoff + tile).to(tl.float32)
            xv = tl.load(VH + hoff + tile).to(tl.float32)
            _store_int2(xk, dst, h, KC, KS, KZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb, FK, SPK, CLIP_K, D, D4, NG, BS,
                        TILE16)
            _store_int2(xv, dst, h, VC, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb, FV, SPV, CLIP_V, D, D4, NG, BS,
                        TILE16)
    if DO_WRITE:
        # The new row may overwrite the ring slot just demoted above: all threads of the program must
        # have read it first.
        tl.debug_barrier()
        kx = tl.load(K + r * s_kr + h * s_kh + tile)
        vx = tl.load(V + r * s_vr + h * s_vh + tile)
        hs = tl.load(HP_SLOT + r)
        if hs >= 0:
            hoff = (hs // BS) * s_hn + h * s_hh + (hs % BS) * s_hb
            tl.store(KH + hoff + tile, kx.to(KH.dtype.element_ty))
            tl.store(VH + hoff + tile, vx.to(VH.dtype.element_ty))
        i2s = tl.load(I2_SLOT + r)
        if i2s >= 0:
            _store_int2(kx.to(tl.float32), i2s, h, KC, KS, KZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb, FK, SPK, CLIP_K, D,
                        D4, NG, BS, TILE16)
            _store_int2(vx.to(tl.float32), i2s, h, VC, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb, FV, SPV, CLIP_V, D,
                        D4, NG, BS, TILE16)


@lru_cache(maxsize=None)
def _tile16_tables(d: int, device: torch.device) -> tuple:
    """The tile16 writer's tables on ``device``, copied there once: field of each (token, dim) for K and V, the
    stored index of each token's scale / zero for K and V."""
    return (field_index(d, "k").to(device), field_index(d, "v").to(device), SCALE_INV["k"].to(device, torch.int32),
            SCALE_INV["v"].to(device, torch.int32))


def write_kv_triton(pool, k, v, plan) -> None:
    """Launch(es) of ``write_kv_kernel``; see ``reference.write_kv_torch`` for the semantics."""
    rows, hkv, d = k.shape
    if rows == 0 and plan.demote_src.shape[0] == 0:
        return
    if k.stride(-1) != 1 or v.stride(-1) != 1:
        k, v = k.contiguous(), v.contiguous()
    dev = pool.k_hp.device
    plan = plan.to(dev)
    for t in (pool.k_codes, pool.k_scale, pool.k_hp):
        assert t.stride(-1) == 1
    tile16 = pool.layout == "tile16"
    if tile16:
        # each (block, KV head)'s codes as int32 words (16 rows of d/4 bytes, contiguous: tile16_records)
        kc, vc = (c.flatten(-2).view(torch.int32) for c in (pool.k_codes, pool.v_codes))
        tabs = _tile16_tables(d, torch.device(dev))
    else:
        kc, vc = pool.k_codes, pool.v_codes
        tabs = (plan.hp_slots,) * 4  # unused
    args = (
        k, v, k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        plan.hp_slots, plan.int2_slots, plan.demote_src, plan.demote_dst,
        kc, pool.k_scale, pool.k_zero, vc, pool.v_scale, pool.v_zero,
        *kc.stride()[:2], 0 if tile16 else kc.stride(2), *pool.k_scale.stride()[:3],
        pool.k_hp, pool.v_hp, *pool.k_hp.stride()[:3], *tabs,
    )
    kw = dict(CLIP_K=kernel_clip_index(pool.k_cfg, d), CLIP_V=kernel_clip_index(pool.v_cfg, d), D=d, D4=d // 4,
              NG=pool.num_groups, BS=pool.block_size, TILE16=tile16, num_warps=4)
    n_dem = plan.demote_src.shape[0]
    if n_dem == rows and plan.fusable:  # row-aligned demotions (per-token rule): one fused launch
        write_kv_kernel[(rows, hkv)](*args, DO_DEMOTE=True, DO_WRITE=True, **kw)
        return
    # page-wise demotion (0 or a page of rows this step): demote first, then write the new rows
    if n_dem:
        write_kv_kernel[(n_dem, hkv)](*args, DO_DEMOTE=True, DO_WRITE=False, **kw)
    if rows:
        write_kv_kernel[(rows, hkv)](*args, DO_DEMOTE=False, DO_WRITE=True, **kw)
