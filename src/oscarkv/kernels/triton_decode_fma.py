"""INT2 decode attention for small GQA groups: CUDA-core (FMA) formulation, no tensor cores.

Same cache layout, split-K scheme, scratch format and merge as ``triton_decode`` (whose BF16-tier split
and merge kernels this launcher reuses); only the INT2-tier split differs. Motivation (BENCHMARKS.md):
the MMA kernel pads the g = 4 query heads of a KV head to 16 MMA columns and moves every unpacked code
tile through shared memory into operand layout; it ran at 168 registers and ~30 SM cycles per
(token, KV head). Here the G real heads are the leading axis of small broadcast products:

    logits[g, n] = s_n * sum_p sum_j q_p[g, j] c_p[n, j] + z_n * sum_d q[g, d]        (one group, NG == 1)
    o_p[g, j]   += sum_n (p[g, n] s_n) c_p[n, j],     zsum[g] += sum_n p[g, n] z_n

with c_p the codes of bit plane p (dims p*d/4 .. (p+1)*d/4 - 1, quartered packing), as broadcast
products reduced with tl.sum (layout in ``_fma_int2_split``). Loads go through ``tl.range(num_stages=)``
(cp.async into shared memory), and the online softmax rescales lazily (only when the max grows by > tau).

Measured (BENCHMARKS.md, "CUDA-core variant", H200, triton 3.6): correct (same error as the MMA
kernel against fp64), but 0.48-0.66x the MMA kernel's speed at every shape tried (4K-128K, batch 1-32),
so ``decode_attention(kernel="auto")`` does not pick it. It is instruction-bound: a lane owns one
4-byte word (16 codes) of one token, and Triton's code spends ~650 SASS instructions per lane and token
(8 lanes per token: ~41 issue cycles per (token, KV head) vs ~30 measured for the MMA kernel; fp32 FMAs
alone are 1024 per (token, KV head) with G = 4, i.e. >= 8 cycles, before unpack and softmax). Defaults =
the sweep winner (block_n 4, 1 warp, 4 stages, 32 CTAs per SM worth of splits).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .triton_decode import _hp_split, _interpreting, _TORCH2TL, decode_merge_kernel, decode_stage1_kernel, plan_launch


@triton.jit
def _unpack(x, sh, MAGIC: tl.constexpr):
    """Codes of int32 words ``x`` at bit offsets ``sh`` as fp32.

    MAGIC: returns 1 + c/4 built from bits (0x3F800000 | c << 21: shift, shift, and/or), no int->float
    convert; the caller removes the 1 and the 1/4 after the sums. Else c itself (shift, and, convert).
    """
    xu = x.to(tl.uint32, bitcast=True)
    if MAGIC:
        return ((((xu >> sh) & 3) << 21) | 0x3F800000).to(tl.float32, bitcast=True)
    else:
        return ((xu >> sh) & 3).to(tl.float32)


@triton.jit
def _fma_int2_split(Q, s_qb, s_qh, KW, VW, KS, KZ, VS, VZ, s_wn, s_wh, s_wb, s_sn, s_sh, s_sb,
                    BT, s_bt, LENS, O, LSE, s_ob, s_oh, s_os,
                    b, kvh, sp, osp, nsplit, scale_log2,
                    G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, NG: tl.constexpr, BS: tl.constexpr,
                    BN: tl.constexpr, R: tl.constexpr, TAU: tl.constexpr, STAGES: tl.constexpr, MAGIC: tl.constexpr):
    # Tensors are [GP heads, 16 (plane p, byte t), R, BN, W words]: element (g, i, r, j, w) is dim
    # d = p*D/4 + 4w + t of token n0 + r*BN + j, i = 4p + t, i.e. bits 8t + 2p of int32 word w of the
    # packed row. Triton spreads W then BN over lanes and warps; i and r stay in-thread. So a lane owns
    # one word of R tokens, and keeps the 16 x GP query values of that word in registers: K reduces over
    # i in-thread and over W across W lanes; V sums over r in-thread and accumulates per (g, i, j, w)
    # over the whole split, reducing over BN once at the end. R > 1 amortises the per-tile work
    # (addresses, softmax, pipeline bookkeeping) over R tokens per lane without growing the accumulator.
    D4: tl.constexpr = D // 4
    W: tl.constexpr = D4 // 4
    TN: tl.constexpr = R * BN
    PPG: tl.constexpr = 4 // NG  # planes per group
    g = tl.arange(0, GP)
    heads = kvh * G + g
    hmask = g < G
    i = tl.arange(0, 16)
    w = tl.arange(0, W)
    shift = 8 * (i % 4) + 2 * (i // 4)  # [16]
    d_iw = (i // 4)[:, None] * D4 + 4 * w[None, :] + (i % 4)[:, None]  # [16, W] head dim of (i, w)
    qp = Q + b * s_qb + heads[:, None, None] * s_qh + d_iw[None, :, :]
    q3 = tl.load(qp, mask=hmask[:, None, None], other=0.0).to(tl.float32)  # [GP, 16, W]
    q5 = q3[:, :, None, None, :]  # [GP, 16, 1, 1, W]
    sh5 = shift[None, :, None, None, None].to(tl.uint32)
    CS: tl.constexpr = 4.0 if MAGIC else 1.0  # code = CS * (f - OFF)
    OFF: tl.constexpr = 1.0 if MAGIC else 0.0
    rj = tl.arange(0, R)[:, None] * BN + tl.arange(0, BN)[None, :]  # [R, BN] token offsets in a tile
    L = tl.load(LENS + b)
    per = tl.cdiv(tl.cdiv(L, nsplit), TN) * TN
    start = sp * per
    end = tl.minimum(start + per, L)
    m = tl.full((GP,), float("-inf"), tl.float32)
    acc = tl.zeros((GP, 16, BN, W), tl.float32)
    l2 = tl.zeros((GP, BN), tl.float32)
    if NG == 1:
        qsum = tl.sum(tl.sum(q3, axis=2), axis=1)  # [GP]
        z2 = tl.zeros((GP, BN), tl.float32)
        s2 = tl.zeros((GP, BN), tl.float32)  # sum_n p_n s_n (MAGIC offset of V)
    else:
        qs_i = tl.sum(q3, axis=2)  # [GP, 16]
        z3 = tl.zeros((GP, 16, BN), tl.float32)
        s3 = tl.zeros((GP, 16, BN), tl.float32)
    for n0 in tl.range(start, end, TN, num_stages=STAGES):
        n = n0 + rj
        nm = n < end
        blk = tl.load(BT + b * s_bt + n // BS, mask=nm, other=0).to(tl.int64)
        off = n % BS
        wrow = blk * s_wn + kvh * s_wh + off * s_wb
        srow = blk * s_sn + kvh * s_sh + off * s_sb
        kw = tl.load(KW + wrow[:, :, None] + w[None, None, :], mask=nm[:, :, None], other=0)  # [R, BN, W]
        vw = tl.load(VW + wrow[:, :, None] + w[None, None, :], mask=nm[:, :, None], other=0)
        kc = _unpack(kw[None, None, :, :, :], sh5, MAGIC)  # [1, 16, R, BN, W]
        # ---- logits [GP, R, BN]
        if NG == 1:
            ks = tl.load(KS + srow, mask=nm, other=0.0).to(tl.float32)
            kz = tl.load(KZ + srow, mask=nm, other=0.0).to(tl.float32)
            dot = tl.sum(tl.sum(kc * q5, axis=1), axis=3)
            dot = CS * (dot - OFF * qsum[:, None, None])
            qk = dot * ks[None, :, :] + qsum[:, None, None] * kz[None, :, :]
        else:
            sidx = srow[None, :, :] + ((i // 4) // PPG)[:, None, None]  # [16, R, BN]
            ks_i = tl.load(KS + sidx, mask=nm[None, :, :], other=0.0).to(tl.float32)
            kz_i = tl.load(KZ + sidx, mask=nm[None, :, :], other=0.0).to(tl.float32)
            dot_i = CS * (tl.sum(kc * q5, axis=4) - OFF * qs_i[:, :, None, None])  # [GP, 16, R, BN]
            qk = tl.sum(dot_i * ks_i[None, :, :, :], axis=1)
            qk += tl.sum(qs_i[:, :, None, None] * kz_i[None, :, :, :], axis=1)
        qk = tl.where(nm[None, :, :], qk * scale_log2, float("-inf"))
        # ---- online softmax with lazy rescaling: keep the old max unless it grew by more than TAU
        # (log2 units); p then stays <= 2^TAU, and the accumulators are rescaled only on those tiles.
        m_new = tl.maximum(m, tl.max(tl.max(qk, axis=2), axis=1))
        if tl.max(m_new - m, axis=0) > TAU:
            alpha = tl.exp2(m - m_new)
            acc = acc * alpha[:, None, None, None]
            l2 = l2 * alpha[:, None]
            if NG == 1:
                z2 = z2 * alpha[:, None]
                s2 = s2 * alpha[:, None]
            else:
                z3 = z3 * alpha[:, None, None]
                s3 = s3 * alpha[:, None, None]
            m = m_new
        p = tl.exp2(qk - m[:, None, None])  # [GP, R, BN]
        l2 += tl.sum(p, axis=1)
        # ---- o [GP, 16, BN, W] += sum_r (p s) c ; zero term
        vc = _unpack(vw[None, None, :, :, :], sh5, MAGIC)
        if NG == 1:
            vs = tl.load(VS + srow, mask=nm, other=0.0).to(tl.float32)
            vz = tl.load(VZ + srow, mask=nm, other=0.0).to(tl.float32)
            ps = p * vs[None, :, :]
            acc += tl.sum(ps[:, None, :, :, None] * vc, axis=2)
            z2 += tl.sum(p * vz[None, :, :], axis=1)
            if MAGIC:
                s2 += tl.sum(ps, axis=1)
        else:
            sidx = srow[None, :, :] + ((i // 4) // PPG)[:, None, None]
            vs_i = tl.load(VS + sidx, mask=nm[None, :, :], other=0.0).to(tl.float32)
            vz_i = tl.load(VZ + sidx, mask=nm[None, :, :], other=0.0).to(tl.float32)
            ps = p[:, None, :, :] * vs_i[None, :, :, :]  # [GP, 16, R, BN]
            acc += tl.sum(ps[:, :, :, :, None] * vc, axis=2)
            z3 += tl.sum(p[:, None, :, :] * vz_i[None, :, :, :], axis=2)
            if MAGIC:
                s3 += tl.sum(ps, axis=2)
    l = tl.sum(l2, axis=1)
    o = tl.sum(acc, axis=2)  # [GP, 16, W]
    if NG == 1:
        if MAGIC:
            o = CS * (o - tl.sum(s2, axis=1)[:, None, None])
        o += tl.sum(z2, axis=1)[:, None, None]
    else:
        if MAGIC:
            o = CS * (o - tl.sum(s3, axis=2)[:, :, None])
        o += tl.sum(z3, axis=2)[:, :, None]
    ok = l > 0
    inv = 1.0 / tl.where(ok, l, 1.0)
    lse = tl.where(ok, m + tl.log2(tl.where(ok, l, 1.0)), float("-inf"))
    base = b * s_ob + heads * s_oh + osp * s_os
    tl.store(O + base[:, None, None] + d_iw[None, :, :], o * inv[:, None, None], mask=hmask[:, None, None])
    tl.store(LSE + (b * s_ob + heads * s_oh) // s_os + osp, lse, mask=hmask)


@triton.jit
def decode_stage1_fma_kernel(
    Q, s_qb, s_qh,
    KW, VW, KS, KZ, VS, VZ, s_wn, s_wh, s_wb, s_sn, s_sh, s_sb,
    KH, VH, s_hn, s_hh, s_hb,
    HP_BT, s_hbt, HP_LEN, Q_BT, s_qbt, Q_LEN,
    O, LSE, s_ob, s_oh, s_os,
    n_hp_splits, n_q_splits, osp0, scale_log2,
    HKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, BH: tl.constexpr, D: tl.constexpr, NG: tl.constexpr,
    BS: tl.constexpr, BN_HP: tl.constexpr, BN_Q: tl.constexpr, HP_DT: tl.constexpr, TAU: tl.constexpr,
    R: tl.constexpr = 1, STAGES: tl.constexpr = 1, MAGIC: tl.constexpr = True, WITH_HP: tl.constexpr = True,
):
    # INT2 splits first in the grid: they are the long ones, so they start in the first wave.
    pid = tl.program_id(0)
    b = pid // HKV
    kvh = pid % HKV
    sp = tl.program_id(1)
    if sp < n_q_splits:
        _fma_int2_split(Q, s_qb, s_qh, KW, VW, KS, KZ, VS, VZ, s_wn, s_wh, s_wb, s_sn, s_sh, s_sb,
                        Q_BT, s_qbt, Q_LEN, O, LSE, s_ob, s_oh, s_os,
                        b, kvh, sp, osp0 + sp, n_q_splits, scale_log2, G, GP, D, NG, BS, BN_Q, R, TAU, STAGES, MAGIC)
    elif WITH_HP:
        _hp_split(Q, s_qb, s_qh, KH, VH, s_hn, s_hh, s_hb, HP_BT, s_hbt, HP_LEN, O, LSE, s_ob, s_oh, s_os,
                  b, kvh, sp - n_q_splits, sp, n_hp_splits, scale_log2, G, BH, D, BS, BN_HP, HP_DT, HP_DT)


def decode_attention_triton_fma(
    q, pool, meta, sm_scale: float, *, out=None, block_n: int = 4, block_n_hp: int = 64,
    num_warps: int = 1, num_stages: int = 4, min_split_tokens: int = 256, ctas_per_sm: int = 32, tau: float = 8.0, rows: int = 1, magic: bool = False,
    n_hp_splits: int | None = None, n_q_splits: int | None = None, workspace=None, merge_warps: int = 4,
    separate_hp: bool = True,
):
    """Same contract as ``triton_decode.decode_attention_triton``; INT2 tier on CUDA cores."""
    B, HQ, D = q.shape
    HKV = pool.num_kv_heads
    G = HQ // HKV
    # the BF16 tier keeps the MMA kernel's 2 CTAs/SM; ctas_per_sm applies to the INT2 tier only
    n_hp_splits, n_q_splits, o_part, lse_part, out = plan_launch(
        q, pool, meta, block_n_hp, block_n, min_split_tokens, 2, ctas_per_sm,
        n_hp_splits, n_q_splits, workspace, out)
    hp_dt = tl.float32 if _interpreting() else _TORCH2TL[q.dtype]
    # packed rows as int32 words (d/16 words per row): one 4-byte load per lane and token
    kw, vw = pool.k_codes.view(torch.int32), pool.v_codes.view(torch.int32)
    common = dict(HKV=HKV, G=G, BH=max(16, triton.next_power_of_2(G)), D=D, NG=pool.num_groups, BS=pool.block_size,
                  BN_HP=block_n_hp, HP_DT=hp_dt)
    # separate_hp: the BF16 tier (MMA, many registers) runs as its own launch of triton_decode's kernel,
    # so the INT2 kernel's register count is its own (212 vs 255 + spills fused, sm_90, triton 3.9).
    sep = separate_hp and n_hp_splits > 0 and n_q_splits > 0
    if sep:
        decode_stage1_kernel[(B * HKV, n_hp_splits)](
            q, q.stride(0), q.stride(1),
            pool.k_codes, pool.v_codes, pool.k_scale, pool.k_zero, pool.v_scale, pool.v_zero,
            *pool.k_codes.stride()[:3], *pool.k_scale.stride()[:3],
            pool.k_hp, pool.v_hp, *pool.k_hp.stride()[:3],
            meta.hp_block_tables, meta.hp_block_tables.stride(0), meta.hp_lens,
            meta.int2_block_tables, meta.int2_block_tables.stride(0), meta.int2_lens,
            o_part, lse_part, o_part.stride(0), o_part.stride(1), o_part.stride(2),
            n_hp_splits, 0, sm_scale * 1.4426950408889634,
            BN_Q=16, QK_DT=hp_dt, PV_DT=hp_dt, ASM=False, PREFETCH=False, num_warps=4, num_stages=3, **common,
        )
    if n_hp_splits + n_q_splits > 0:
        decode_stage1_fma_kernel[(B * HKV, n_q_splits if sep else n_hp_splits + n_q_splits)](
            q, q.stride(0), q.stride(1),
            kw, vw, pool.k_scale, pool.k_zero, pool.v_scale, pool.v_zero,
            *kw.stride()[:3], *pool.k_scale.stride()[:3],
            pool.k_hp, pool.v_hp, *pool.k_hp.stride()[:3],
            meta.hp_block_tables, meta.hp_block_tables.stride(0), meta.hp_lens,
            meta.int2_block_tables, meta.int2_block_tables.stride(0), meta.int2_lens,
            o_part, lse_part, o_part.stride(0), o_part.stride(1), o_part.stride(2),
            n_hp_splits, n_q_splits, n_hp_splits if sep else 0, sm_scale * 1.4426950408889634,
            GP=triton.next_power_of_2(G), BN_Q=block_n, R=rows, TAU=tau, STAGES=num_stages, MAGIC=magic, WITH_HP=not sep,
            num_warps=num_warps, num_stages=num_stages, **common,
        )
    else:
        lse_part.fill_(float("-inf"))
        o_part.zero_()
    nsplit = n_hp_splits + n_q_splits if n_hp_splits + n_q_splits > 0 else 1
    decode_merge_kernel[(B * HQ,)](
        o_part, lse_part, o_part.stride(0), o_part.stride(1), o_part.stride(2),
        out, out.stride(0), out.stride(1), nsplit, HQ=HQ, D=D, BSPLIT=32, num_warps=merge_warps,
    )
    return out
