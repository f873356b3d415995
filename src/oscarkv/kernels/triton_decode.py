"""Triton split-K decode attention over the paged mixed cache (BF16 sink/recent + INT2 history).

Stage 1 (one launch): grid (batch * num_kv_heads, n_hp_splits + n_int2_splits). A program takes one KV
head, all g query heads that share it (GQA: padded to BLOCK_H >= 16 for tl.dot; rows of the MMA in the
BF16 tier, columns in the INT2 tier, whose tiles are token-major), and one contiguous token range of one
tier. It writes an unnormalised-free partial result o_s = sum p v / sum p and its
log2-sum-exp to scratch. Stage 2 (one launch) merges the splits per (batch, query head):
    o = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M),
which equals softmax attention over the union of all tokens, i.e. over the dequantized cache.

INT2 tiles are never dequantized to head_dim values. With x = z + s * c per (token, group), and each
bit plane p (dims p*d/4 ... (p+1)*d/4 - 1) inside one group:
    q . x        = sum_p [ s_p (q_p . c_p) + z_p sum(q_p) ]
    sum_n p_n x_n = sum_p [ (p * s_p) @ C_p  +  sum_n p_n z_n,p ]
so the MMAs run on raw codes (0..3, exact in bf16/fp16) and the affine part is a per-token scale of the
logits and a per-query scalar for V. This keeps the inner loop at unpack + convert + MMA.

Performance (BENCHMARKS.md): on an H200 this loop is bound by unpack + layout-conversion work and
latency, not HBM bytes (about 14% of copy bandwidth at 128K, batch 1); BENCHMARKS.md lists the fixes.

Departures from the spec's kernel (section 5.2): one stage-1 launch handles both tiers (spec: two), the
hp tier is split as well (its 320 tokens are 160 KB per head, too much for one program at batch 1),
(s, z) are fp16 by default and applied after the MMA instead of dequantizing a [d, BLOCK_N] tile.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..errors import InputError
from .paged import TRITON_GPU_MIN_HEAD_DIM


@triton.jit
def _split_range(L, sp, NSPLIT, BN: tl.constexpr):
    # Per-sequence split length, rounded to BN so every tile but the last is full.
    per = tl.cdiv(tl.cdiv(L, NSPLIT), BN) * BN
    start = sp * per
    end = tl.minimum(start + per, L)
    return start, end


@triton.jit
def _hp_split(Q, s_qb, s_qh, KH, VH, s_hn, s_hh, s_hb, BT, s_bt, LENS, O, LSE, s_ob, s_oh, s_os,
              b, kvh, sp, osp, nsplit, scale_log2,
              G: tl.constexpr, BH: tl.constexpr, D: tl.constexpr, BS: tl.constexpr, BN: tl.constexpr,
              QK_DT: tl.constexpr, PV_DT: tl.constexpr):
    hr = tl.arange(0, BH)
    heads = kvh * G + hr
    hmask = hr < G
    dd = tl.arange(0, D)
    q = tl.load(Q + b * s_qb + heads[:, None] * s_qh + dd[None, :], mask=hmask[:, None], other=0.0).to(QK_DT)
    L = tl.load(LENS + b)
    start, end = _split_range(L, sp, nsplit, BN)
    m = tl.full((BH,), float("-inf"), tl.float32)
    l = tl.zeros((BH,), tl.float32)
    acc = tl.zeros((BH, D), tl.float32)
    for n0 in range(start, end, BN):
        n = n0 + tl.arange(0, BN)
        nm = n < end
        blk = tl.load(BT + b * s_bt + n // BS, mask=nm, other=0).to(tl.int64)
        row = blk * s_hn + kvh * s_hh + (n % BS) * s_hb
        k = tl.load(KH + row[:, None] + dd[None, :], mask=nm[:, None], other=0.0)
        v = tl.load(VH + row[:, None] + dd[None, :], mask=nm[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k.to(QK_DT))) * scale_log2
        qk = tl.where(nm[None, :], qk, float("-inf"))
        m_new = tl.maximum(m, tl.max(qk, axis=1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(PV_DT), v.to(PV_DT))
        m = m_new
    ok = l > 0
    o = acc / tl.where(ok, l, 1.0)[:, None]
    lse = tl.where(ok, m + tl.log2(tl.where(ok, l, 1.0)), float("-inf"))
    base = b * s_ob + heads * s_oh + osp * s_os
    tl.store(O + base[:, None] + dd[None, :], o, mask=hmask[:, None])
    tl.store(LSE + (b * s_ob + heads * s_oh) // s_os + osp, lse, mask=hmask)


@triton.jit
def _codes(x, P: tl.constexpr, DT: tl.constexpr, ASM: tl.constexpr):
    """Bit plane P of packed uint8 codes as DT values 0..3.

    ASM (GPU only, DT = fp16): 4 codes per ~5 instructions (shift, and, two byte-permutes that place each
    code under the fp16 exponent of 1024, one f16x2 subtract of 1024), instead of shift/and/two converts
    per code. At 2 bits a code, unpacking, not HBM, is what bounds this loop on an H200.
    """
    if ASM:
        if P == 0:
            return tl.inline_asm_elementwise(
                "{ .reg .b32 t, k, h; and.b32 t, $2, 0x03030303; mov.b32 k, 0x64646464; mov.b32 h, 0x64006400;"
                " prmt.b32 $0, t, k, 0x4140; prmt.b32 $1, t, k, 0x4342; sub.f16x2 $0, $0, h; sub.f16x2 $1, $1, h; }",
                "=r,=r,r", [x], dtype=tl.float16, is_pure=True, pack=4)
        elif P == 1:
            return tl.inline_asm_elementwise(
                "{ .reg .b32 t, k, h; shr.b32 t, $2, 2; and.b32 t, t, 0x03030303; mov.b32 k, 0x64646464; mov.b32 h, 0x64006400;"
                " prmt.b32 $0, t, k, 0x4140; prmt.b32 $1, t, k, 0x4342; sub.f16x2 $0, $0, h; sub.f16x2 $1, $1, h; }",
                "=r,=r,r", [x], dtype=tl.float16, is_pure=True, pack=4)
        elif P == 2:
            return tl.inline_asm_elementwise(
                "{ .reg .b32 t, k, h; shr.b32 t, $2, 4; and.b32 t, t, 0x03030303; mov.b32 k, 0x64646464; mov.b32 h, 0x64006400;"
                " prmt.b32 $0, t, k, 0x4140; prmt.b32 $1, t, k, 0x4342; sub.f16x2 $0, $0, h; sub.f16x2 $1, $1, h; }",
                "=r,=r,r", [x], dtype=tl.float16, is_pure=True, pack=4)
        else:
            return tl.inline_asm_elementwise(
                "{ .reg .b32 t, k, h; shr.b32 t, $2, 6; and.b32 t, t, 0x03030303; mov.b32 k, 0x64646464; mov.b32 h, 0x64006400;"
                " prmt.b32 $0, t, k, 0x4140; prmt.b32 $1, t, k, 0x4342; sub.f16x2 $0, $0, h; sub.f16x2 $1, $1, h; }",
                "=r,=r,r", [x], dtype=tl.float16, is_pure=True, pack=4)
    else:
        return ((x >> (2 * P)) & 3).to(tl.float32).to(DT)


@triton.jit
def _int2_tile(KC, VC, KS, KZ, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb, BT, s_bt, b, kvh, n0, end, j,
               NG: tl.constexpr, BS: tl.constexpr, BN: tl.constexpr):
    """Loads of one BN-token tile: K codes [BN, D4], V codes [D4, BN] (uint8), per-token (s, z) when NG == 1."""
    n = n0 + tl.arange(0, BN)
    nm = n < end
    blk = tl.load(BT + b * s_bt + n // BS, mask=nm, other=0).to(tl.int64)
    off = n % BS
    crow = blk * s_cn + kvh * s_ch + off * s_cb
    srow = blk * s_sn + kvh * s_sh + off * s_sb
    kc = tl.load(KC + crow[:, None] + j[None, :], mask=nm[:, None], other=0)
    vc = tl.load(VC + crow[None, :] + j[:, None], mask=nm[None, :], other=0)
    if NG == 1:
        ks = tl.load(KS + srow, mask=nm, other=0.0).to(tl.float32)
        kz = tl.load(KZ + srow, mask=nm, other=0.0).to(tl.float32)
        vs = tl.load(VS + srow, mask=nm, other=0.0).to(tl.float32)
        vz = tl.load(VZ + srow, mask=nm, other=0.0).to(tl.float32)
    else:  # grouped scales are loaded per plane by the caller
        ks = tl.zeros((BN,), tl.float32)
        kz = ks
        vs = ks
        vz = ks
    return kc, vc, ks, kz, vs, vz, srow, nm


@triton.jit
def _plane_scales(S, Z, srow, nm, PPG: tl.constexpr):
    """Grouped scales (NG > 1): each of the four 2-bit planes' per-token (scale, zero); plane p uses group p // PPG."""
    s0 = tl.load(S + srow + 0 // PPG, mask=nm, other=0.0).to(tl.float32)
    s1 = tl.load(S + srow + 1 // PPG, mask=nm, other=0.0).to(tl.float32)
    s2 = tl.load(S + srow + 2 // PPG, mask=nm, other=0.0).to(tl.float32)
    s3 = tl.load(S + srow + 3 // PPG, mask=nm, other=0.0).to(tl.float32)
    z0 = tl.load(Z + srow + 0 // PPG, mask=nm, other=0.0).to(tl.float32)
    z1 = tl.load(Z + srow + 1 // PPG, mask=nm, other=0.0).to(tl.float32)
    z2 = tl.load(Z + srow + 2 // PPG, mask=nm, other=0.0).to(tl.float32)
    z3 = tl.load(Z + srow + 3 // PPG, mask=nm, other=0.0).to(tl.float32)
    return s0, s1, s2, s3, z0, z1, z2, z3


@triton.jit
def _int2_split(Q, s_qb, s_qh, KC, VC, KS, KZ, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb,
                BT, s_bt, LENS, O, LSE, s_ob, s_oh, s_os,
                b, kvh, sp, osp, nsplit, scale_log2,
                G: tl.constexpr, BH: tl.constexpr, D: tl.constexpr, NG: tl.constexpr, BS: tl.constexpr,
                BN: tl.constexpr, QK_DT: tl.constexpr, PV_DT: tl.constexpr, ASM: tl.constexpr, PREFETCH: tl.constexpr):
    # Tiles are token-major ("transposed" w.r.t. the hp path): codes are the MMA's A operand with
    # M = BLOCK_N tokens (K side) or M = d/4 dims (V side), and the G query heads sit in N (padded to 16),
    # so no MMA rows are wasted on padding heads and the unpacked codes feed the MMA directly.
    D4: tl.constexpr = D // 4
    PPG: tl.constexpr = 4 // NG  # planes per group; plane p uses group p // PPG
    hc = tl.arange(0, BH)
    heads = kvh * G + hc
    hmask = hc < G
    j = tl.arange(0, D4)
    qcol = Q + b * s_qb + heads[None, :] * s_qh + j[:, None]  # [D4, BH]: q_p transposed
    q0 = tl.load(qcol + 0 * D4, mask=hmask[None, :], other=0.0)
    q1 = tl.load(qcol + 1 * D4, mask=hmask[None, :], other=0.0)
    q2 = tl.load(qcol + 2 * D4, mask=hmask[None, :], other=0.0)
    q3 = tl.load(qcol + 3 * D4, mask=hmask[None, :], other=0.0)
    qs0 = tl.sum(q0.to(tl.float32), axis=0)
    qs1 = tl.sum(q1.to(tl.float32), axis=0)
    qs2 = tl.sum(q2.to(tl.float32), axis=0)
    qs3 = tl.sum(q3.to(tl.float32), axis=0)
    q0, q1, q2, q3 = q0.to(QK_DT), q1.to(QK_DT), q2.to(QK_DT), q3.to(QK_DT)
    L = tl.load(LENS + b)
    start, end = _split_range(L, sp, nsplit, BN)
    m = tl.full((BH,), float("-inf"), tl.float32)
    l = tl.zeros((BH,), tl.float32)
    a0 = tl.zeros((D4, BH), tl.float32)  # o^T per plane
    a1 = tl.zeros((D4, BH), tl.float32)
    a2 = tl.zeros((D4, BH), tl.float32)
    a3 = tl.zeros((D4, BH), tl.float32)
    z0 = tl.zeros((BH,), tl.float32)  # sum_n p_n * zero_n per plane (all planes equal when NG == 1)
    z1 = tl.zeros((BH,), tl.float32)
    z2 = tl.zeros((BH,), tl.float32)
    z3 = tl.zeros((BH,), tl.float32)
    # PREFETCH: the loads of tile i + 1 are issued before tile i is computed (register double buffer,
    # ~16 B per thread per tile). Without it each iteration waited a full HBM round trip for 4-9 KB, so the
    # INT2 loop ran at the BF16 loop's speed (same iteration count, same latency) despite 7x fewer bytes.
    kc, vc, ks, kz, vs, vz, srow, nm = _int2_tile(KC, VC, KS, KZ, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb,
                                                  BT, s_bt, b, kvh, start, end, j, NG, BS, BN)
    for n0 in range(start, end, BN):
        if PREFETCH:
            kc2, vc2, ks2, kz2, vs2, vz2, srow2, nm2 = _int2_tile(
                KC, VC, KS, KZ, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb, BT, s_bt, b, kvh, n0 + BN, end, j, NG, BS, BN)
        else:
            kc, vc, ks, kz, vs, vz, srow, nm = _int2_tile(
                KC, VC, KS, KZ, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb, BT, s_bt, b, kvh, n0, end, j, NG, BS, BN)
        # ---- logits^T [BN, BH]: s_p (C_p q_p) + z_p sum(q_p)
        if NG == 1:
            qc = tl.dot(_codes(kc, 0, QK_DT, ASM), q0)
            qc = tl.dot(_codes(kc, 1, QK_DT, ASM), q1, qc)
            qc = tl.dot(_codes(kc, 2, QK_DT, ASM), q2, qc)
            qc = tl.dot(_codes(kc, 3, QK_DT, ASM), q3, qc)
            qk = qc * ks[:, None] + kz[:, None] * (qs0 + qs1 + qs2 + qs3)[None, :]
        else:
            ks0, ks1, ks2, ks3, kz0, kz1, kz2, kz3 = _plane_scales(KS, KZ, srow, nm, PPG)
            qk = tl.dot(_codes(kc, 0, QK_DT, ASM), q0) * ks0[:, None] + kz0[:, None] * qs0[None, :]
            qk += tl.dot(_codes(kc, 1, QK_DT, ASM), q1) * ks1[:, None] + kz1[:, None] * qs1[None, :]
            qk += tl.dot(_codes(kc, 2, QK_DT, ASM), q2) * ks2[:, None] + kz2[:, None] * qs2[None, :]
            qk += tl.dot(_codes(kc, 3, QK_DT, ASM), q3) * ks3[:, None] + kz3[:, None] * qs3[None, :]
        qk = tl.where(nm[:, None], qk * scale_log2, float("-inf"))
        m_new = tl.maximum(m, tl.max(qk, axis=0))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(qk - m_new[None, :])  # [BN, BH]
        l = l * alpha + tl.sum(p, axis=0)
        m = m_new
        # ---- o^T [D4, BH] per plane: C_p^T (p * s_p)  +  sum_n p_n z_p,n
        if NG == 1:
            ps = (p * vs[:, None]).to(PV_DT)
            a0 = tl.dot(_codes(vc, 0, PV_DT, ASM), ps, a0 * alpha[None, :])
            a1 = tl.dot(_codes(vc, 1, PV_DT, ASM), ps, a1 * alpha[None, :])
            a2 = tl.dot(_codes(vc, 2, PV_DT, ASM), ps, a2 * alpha[None, :])
            a3 = tl.dot(_codes(vc, 3, PV_DT, ASM), ps, a3 * alpha[None, :])
            z0 = z0 * alpha + tl.sum(p * vz[:, None], axis=0)
        else:
            vs0, vs1, vs2, vs3, vz0, vz1, vz2, vz3 = _plane_scales(VS, VZ, srow, nm, PPG)
            a0 = tl.dot(_codes(vc, 0, PV_DT, ASM), (p * vs0[:, None]).to(PV_DT), a0 * alpha[None, :])
            a1 = tl.dot(_codes(vc, 1, PV_DT, ASM), (p * vs1[:, None]).to(PV_DT), a1 * alpha[None, :])
            a2 = tl.dot(_codes(vc, 2, PV_DT, ASM), (p * vs2[:, None]).to(PV_DT), a2 * alpha[None, :])
            a3 = tl.dot(_codes(vc, 3, PV_DT, ASM), (p * vs3[:, None]).to(PV_DT), a3 * alpha[None, :])
            z0 = z0 * alpha + tl.sum(p * vz0[:, None], axis=0)
            z1 = z1 * alpha + tl.sum(p * vz1[:, None], axis=0)
            z2 = z2 * alpha + tl.sum(p * vz2[:, None], axis=0)
            z3 = z3 * alpha + tl.sum(p * vz3[:, None], axis=0)
        if PREFETCH:
            kc, vc, ks, kz, vs, vz, srow, nm = kc2, vc2, ks2, kz2, vs2, vz2, srow2, nm2
    if NG == 1:
        z1, z2, z3 = z0, z0, z0
    ok = l > 0
    inv = 1.0 / tl.where(ok, l, 1.0)
    lse = tl.where(ok, m + tl.log2(tl.where(ok, l, 1.0)), float("-inf"))
    base = b * s_ob + heads * s_oh + osp * s_os
    optr = O + base[None, :] + j[:, None]
    om = hmask[None, :]
    tl.store(optr + 0 * D4, (a0 + z0[None, :]) * inv[None, :], mask=om)
    tl.store(optr + 1 * D4, (a1 + z1[None, :]) * inv[None, :], mask=om)
    tl.store(optr + 2 * D4, (a2 + z2[None, :]) * inv[None, :], mask=om)
    tl.store(optr + 3 * D4, (a3 + z3[None, :]) * inv[None, :], mask=om)
    tl.store(LSE + (b * s_ob + heads * s_oh) // s_os + osp, lse, mask=hmask)


@triton.jit
def decode_stage1_kernel(
    Q, s_qb, s_qh,
    KC, VC, KS, KZ, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb,
    KH, VH, s_hn, s_hh, s_hb,
    HP_BT, s_hbt, HP_LEN, I2_BT, s_i2bt, I2_LEN,
    O, LSE, s_ob, s_oh, s_os,
    n_hp_splits, n_int2_splits, scale_log2,
    HKV: tl.constexpr, G: tl.constexpr, BH: tl.constexpr, D: tl.constexpr, NG: tl.constexpr,
    BS: tl.constexpr, BN_HP: tl.constexpr, BN_I2: tl.constexpr, QK_DT: tl.constexpr, PV_DT: tl.constexpr,
    ASM: tl.constexpr, HP_DT: tl.constexpr, PREFETCH: tl.constexpr,
):
    pid = tl.program_id(0)
    b = pid // HKV
    kvh = pid % HKV
    sp = tl.program_id(1)
    if sp < n_hp_splits:
        _hp_split(Q, s_qb, s_qh, KH, VH, s_hn, s_hh, s_hb, HP_BT, s_hbt, HP_LEN, O, LSE, s_ob, s_oh, s_os,
                  b, kvh, sp, sp, n_hp_splits, scale_log2, G, BH, D, BS, BN_HP, HP_DT, HP_DT)
    else:
        _int2_split(Q, s_qb, s_qh, KC, VC, KS, KZ, VS, VZ, s_cn, s_ch, s_cb, s_sn, s_sh, s_sb,
                    I2_BT, s_i2bt, I2_LEN, O, LSE, s_ob, s_oh, s_os,
                    b, kvh, sp - n_hp_splits, sp, n_int2_splits, scale_log2, G, BH, D, NG, BS, BN_I2, QK_DT, PV_DT, ASM, PREFETCH)


@triton.jit
def decode_merge_kernel(O, LSE, s_ob, s_oh, s_os, OUT, s_outb, s_outh, nsplit,
                        HQ: tl.constexpr, D: tl.constexpr, BSPLIT: tl.constexpr):
    pid = tl.program_id(0)
    b = pid // HQ
    h = pid % HQ
    base = b * s_ob + h * s_oh
    dd = tl.arange(0, D)
    m = tl.full((BSPLIT,), float("-inf"), tl.float32)
    for s0 in range(0, nsplit, BSPLIT):
        s = s0 + tl.arange(0, BSPLIT)
        m = tl.maximum(m, tl.load(LSE + base // s_os + s, mask=s < nsplit, other=float("-inf")))
    mx = tl.max(m, axis=0)
    mx = tl.where(mx == float("-inf"), 0.0, mx)  # no token at all: every weight is 0 below
    acc = tl.zeros((D,), tl.float32)
    den = tl.zeros((BSPLIT,), tl.float32)
    for s0 in range(0, nsplit, BSPLIT):
        s = s0 + tl.arange(0, BSPLIT)
        sm = s < nsplit
        w = tl.exp2(tl.load(LSE + base // s_os + s, mask=sm, other=float("-inf")) - mx)
        o = tl.load(O + base + s[:, None] * s_os + dd[None, :], mask=sm[:, None], other=0.0)
        acc += tl.sum(w[:, None] * o, axis=0)
        den += w
    tot = tl.sum(den, axis=0)
    out = acc / tl.where(tot > 0, tot, 1.0)
    tl.store(OUT + b * s_outb + h * s_outh + dd, out.to(OUT.dtype.element_ty))


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


_TORCH2TL = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


def num_sms(device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def choose_splits(max_len: int, batch_heads: int, block_n: int, sms: int, min_tokens: int, ctas_per_sm: int = 2) -> int:
    """Splits for one tier: enough programs to fill ``ctas_per_sm`` waves, each with >= ``min_tokens`` tokens."""
    if max_len <= 0:
        return 0
    by_len = triton.cdiv(max_len, max(min_tokens, block_n))
    by_occ = triton.cdiv(ctas_per_sm * sms, batch_heads)
    return max(1, min(by_len, by_occ))


def plan_launch(q, pool, meta, block_n_hp, block_n, min_split_tokens, hp_ctas_per_sm, ctas_per_sm,
                n_hp_splits, n_int2_splits, workspace, out):
    """Host side shared by the decode launchers: split counts per tier (from host-side maxima in
    ``meta.max_hp_len`` / ``meta.max_int2_len`` when set, else one device sync), the partial-output
    workspace and the output tensor. Returns (n_hp_splits, n_int2_splits, o_part, lse_part, out)."""
    B, HQ, D = q.shape
    HKV = pool.num_kv_heads
    assert HQ % HKV == 0 and D == pool.head_dim and q.stride(-1) == 1
    sms = num_sms(q.device)
    max_hp = meta.max_hp_len if meta.max_hp_len is not None else int(meta.hp_lens.max())
    max_i2 = meta.max_int2_len if meta.max_int2_len is not None else int(meta.int2_lens.max())
    if n_hp_splits is None:
        n_hp_splits = choose_splits(max_hp, B * HKV, block_n_hp, sms, 64, hp_ctas_per_sm)
    if n_int2_splits is None:
        n_int2_splits = choose_splits(max_i2, B * HKV, block_n, sms, min_split_tokens, ctas_per_sm)
    ns = max(1, n_hp_splits + n_int2_splits)
    if workspace is None:
        o_part = torch.empty(B, HQ, ns, D, dtype=torch.float32, device=q.device)
        lse_part = torch.empty(B, HQ, ns, dtype=torch.float32, device=q.device)
    else:
        o_part, lse_part = workspace
        assert o_part.shape[2] >= ns
    # lse_part shares o_part's (b, h, split) strides divided by D: keep both contiguous.
    assert o_part.is_contiguous() and lse_part.is_contiguous() and o_part.shape[2] == lse_part.shape[2]
    if out is None:
        out = torch.empty_like(q)
    return n_hp_splits, n_int2_splits, o_part, lse_part, out


def decode_attention_triton(
    q, pool, meta, sm_scale: float, *, out=None, block_n: int = 128, block_n_hp: int = 64,
    num_warps: int = 4, num_stages: int = 3, min_split_tokens: int = 256, ctas_per_sm: int = 2,
    asm_unpack: bool = True, prefetch: bool = True,
    n_hp_splits: int | None = None, n_int2_splits: int | None = None, workspace=None,
):
    """q ``[batch, num_q_heads, head_dim]`` (rotated) -> ``[batch, num_q_heads, head_dim]`` in q's dtype.

    Split counts come from host-side maxima (``meta.max_hp_len`` / ``meta.max_int2_len`` when set, else
    one device sync to read them). ``workspace`` = (o_part, lse_part) may be passed to avoid allocation
    (e.g. under CUDA graphs); it must hold at least the number of splits used.
    """
    B, HQ, D = q.shape
    if q.is_cuda and not _interpreting() and D < TRITON_GPU_MIN_HEAD_DIM:
        raise InputError(f"the Triton decode kernel needs head_dim >= {TRITON_GPU_MIN_HEAD_DIM} on a GPU (its dots "
                         f"run over head_dim / 4 codes, Triton's minimum is 16), got {D}; use backend='torch'")
    HKV = pool.num_kv_heads
    G = HQ // HKV
    n_hp_splits, n_int2_splits, o_part, lse_part, out = plan_launch(
        q, pool, meta, block_n_hp, block_n, min_split_tokens, ctas_per_sm, ctas_per_sm,
        n_hp_splits, n_int2_splits, workspace, out)
    interp = _interpreting()
    asm = asm_unpack and not interp
    # interpreter: bf16 tl.dot is wrong (triton 3.9), so everything is fp32 there. With the asm unpack the
    # codes come out as fp16, so q meets them as fp16 (exact for |q| in [6e-5, 65504], i.e. real queries).
    qk_dt = tl.float32 if interp else (tl.float16 if asm else _TORCH2TL[q.dtype])
    pv_dt = tl.float32 if interp else tl.float16  # p * s in [0, |s|]: fp16 keeps 3 more mantissa bits than bf16
    hp_dt = tl.float32 if interp else _TORCH2TL[q.dtype]  # hp tier: q, K, V and p all in the model dtype
    if n_hp_splits + n_int2_splits > 0:
        decode_stage1_kernel[(B * HKV, n_hp_splits + n_int2_splits)](
            q, q.stride(0), q.stride(1),
            pool.k_codes, pool.v_codes, pool.k_scale, pool.k_zero, pool.v_scale, pool.v_zero,
            *pool.k_codes.stride()[:3], *pool.k_scale.stride()[:3],
            pool.k_hp, pool.v_hp, *pool.k_hp.stride()[:3],
            meta.hp_block_tables, meta.hp_block_tables.stride(0), meta.hp_lens,
            meta.int2_block_tables, meta.int2_block_tables.stride(0), meta.int2_lens,
            o_part, lse_part, o_part.stride(0), o_part.stride(1), o_part.stride(2),
            n_hp_splits, n_int2_splits, sm_scale * 1.4426950408889634,
            HKV=HKV, G=G, BH=max(16, triton.next_power_of_2(G)), D=D, NG=pool.num_groups, BS=pool.block_size,
            BN_HP=block_n_hp, BN_I2=block_n, QK_DT=qk_dt, PV_DT=pv_dt, ASM=asm, HP_DT=hp_dt, PREFETCH=prefetch, num_warps=num_warps, num_stages=num_stages,
        )
    else:  # nothing cached anywhere: the merge then writes zeros
        lse_part.fill_(float("-inf"))
        o_part.zero_()
    nsplit = n_hp_splits + n_int2_splits if n_hp_splits + n_int2_splits > 0 else 1
    decode_merge_kernel[(B * HQ,)](
        o_part, lse_part, o_part.stride(0), o_part.stride(1), o_part.stride(2),
        out, out.stride(0), out.stride(1), nsplit, HQ=HQ, D=D, BSPLIT=32, num_warps=4,
    )
    return out
