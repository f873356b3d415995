"""Lane-by-lane emulation of the CUDA INT2 decode loop (``cuda/int2_paged.cu``, INT2 tier of one warp) on CPU.

CI has no GPU, so this test replays what the kernel computes, register by register, for one warp: the
tile16 words as lanes load them, the int8 query and its per-head step, the K side's in-place masks and
u8 x s8 MMAs (mma.m16n8k32 / m16n8k16 integer fragment layouts, PTX ISA) joined as 64 r0 + 16 r1 + 4 r2 + r3,
the V side's LOP3 unpacking under the fp16 exponent of 1024 (no float math on codes; odd tokens as
-(1024 + 4^P (3 - c))), the fp16 mma.m16n8k16 fragments, movmatrix, the slack softmax with its warp-uniform slow
path (mask, rescale), the l / sum p z MMA and the MMA of sum p' over even / odd tokens, the folds of the V offsets
and the zero-point sum every 32 tiles, and the epilogue's 4^-P per output row. It checks the result against plain float64 attention over the dequantized tokens with the int8 query
(reference.int8_query) on them. A wrong bit position, fragment index or algebra term shows up as an O(1)
error; the tolerance (2e-3 relative) is the fp16 rounding of p and p'. Float MMAs are emulated in float64
(exact products, one rounding to fp32 per MMA), integer MMAs exactly; ``ACC_MODEL = "truncate"`` instead models
the tensor core's fp32 accumulation as measured on NVIDIA parts (products exact, aligned to the largest term,
bits below its fp32 precision dropped, round toward zero): the error that grows with the run between folds of
the V offset, measured on the H200 (issue 8, BENCHMARKS.md seventeenth session). ``log8=(k_top, v_top)`` replays the
log8 records' path (template SF 1: one-byte scale / zero, their tables, the zero in units of its scale, sum p z in
the sp MMA), single and paired tiles (forty-ninth session).
"""

import math
import random
import sys

import pytest
import torch

from oscarkv.kernels.layout import codes_to_tile16, scales_to_tile16
from oscarkv.kernels.reference import int8_query, int8_rows
from oscarkv.quant import pack_codes

K_SLACK, K_FLUSH = 4.0, 32  # as in int2_paged.cu (kSlack, kFlushTiles: the V offsets and sum p z folded every 32 tiles)
LANES = torch.arange(32)
G_OF, T_OF = LANES >> 2, LANES & 3
F32 = torch.float32


def f32(x):
    return x.to(F32)


def h(x):  # round to fp16, keep as float32 values
    return x.to(torch.float16).to(F32)


def halves(u32):
    """uint32 (int64 tensor) -> (low, high) fp16 values as float32."""
    lo = (u32 & 0xFFFF).to(torch.int32).to(torch.int16)
    hi = ((u32 >> 16) & 0xFFFF).to(torch.int32).to(torch.int16)
    return lo.view(torch.float16).to(F32), hi.view(torch.float16).to(F32)


def pack(lo, hi):
    """Two float32 tensors -> uint32 of their fp16 values (round to nearest), as int64."""
    bl = h(lo).to(torch.float16).view(torch.int16).to(torch.int64) & 0xFFFF
    bh = h(hi).to(torch.float16).view(torch.int16).to(torch.int64) & 0xFFFF
    return bl | (bh << 16)


def lop3(w, mask, magic):
    return (w & mask) | magic


def rotr8(w):
    return ((w >> 8) | (w << 24)) & 0xFFFFFFFF


def v_field(i):
    """The field P (unpack8) of the V operand in m-tile i's rows 16 i + g (rows 16 i + g + 8: P + 1), whose 4^P
    weight the kernel's folds and epilogue undo."""
    return 1 + 2 * (i & 1)


def unpack8(w, signed=True):
    """The kernel's unpack8: field P of each half under the exponent of 1024; signed (the kernel since the
    seventeenth session): the odd token's (high) half is -(1024 + 4^P (3 - c)), one LOP3 c ^ (w & mask)."""
    o = [None] * 8
    r = rotr8(w)
    for P in range(1, 5):
        mask = 0x00030003 << (2 * P)
        if signed:
            c = 0xE4006400 | (0x00030000 << (2 * P))
            o[P - 1], o[4 + P - 1] = c ^ (w & mask), c ^ (r & mask)
        else:
            o[P - 1], o[4 + P - 1] = lop3(w, mask, 0x64006400), lop3(r, mask, 0x64006400)
    return o


def offsets(sp, t, signed=True):
    """Per acc register i, the V offsets to subtract: signed, 1024 S_e - (1024 + 3 4^P) S_o with S_e / S_o the
    sp rows 0 / 1 (lanes g = 0 / 1) and P the row's field; else 1024 sum p' (sp, every row)."""
    if not signed:
        return lambda i: [sp[0], sp[1], sp[0], sp[1]]
    se, so = (shfl(sp[0], t), shfl(sp[1], t)), (shfl(sp[0], 4 + t), shfl(sp[1], 4 + t))

    def off(P, h):
        return f32(1024 * se[h].double() - (1024 + 3 * 4**P) * so[h].double())

    def per_register(i):
        P0 = v_field(i)
        return [off(P0, 0), off(P0, 1), off(P0 + 1, 0), off(P0 + 1, 1)]
    return per_register


def a_of(regs):
    """A fragments as per-lane (low, high) value pairs of its 4 registers -> 16 x 16 float64 matrix (PTX
    m16n8k16 A layout: register i holds row g + 8 (i & 1), columns 2t + 8 (i >> 1) and the next)."""
    A = torch.zeros(16, 16, dtype=torch.float64)
    for i, (lo, hi) in enumerate(regs):
        A[G_OF + 8 * (i & 1), 2 * T_OF + 8 * (i >> 1)] = lo.double()
        A[G_OF + 8 * (i & 1), 2 * T_OF + 8 * (i >> 1) + 1] = hi.double()
    return A


def b_of(regs):
    """B fragments as per-lane (low, high) value pairs of its 2 registers -> 16 x 8 (k x n): register i holds
    B[2t + 8 i, 2t + 8 i + 1][g]."""
    B = torch.zeros(16, 8, dtype=torch.float64)
    for i, (lo, hi) in enumerate(regs):
        B[2 * T_OF + 8 * i, G_OF] = lo.double()
        B[2 * T_OF + 8 * i + 1, G_OF] = hi.double()
    return B


def a_matrix(a0, a1, a2, a3):
    """A fragments (per lane uint32 of two fp16) -> 16 x 16 float64 matrix."""
    return a_of([halves(r) for r in (a0, a1, a2, a3)])


def b_matrix(b0, b1):
    """B fragments (per lane uint32 of two fp16) -> 16 x 8 (k x n)."""
    return b_of([halves(r) for r in (b0, b1)])


def c_to_matrix(c):
    C = torch.zeros(16, 8, dtype=torch.float64)
    C[G_OF, 2 * T_OF], C[G_OF, 2 * T_OF + 1] = c[0].double(), c[1].double()
    C[G_OF + 8, 2 * T_OF], C[G_OF + 8, 2 * T_OF + 1] = c[2].double(), c[3].double()
    return C


def matrix_to_c(D):
    return [f32(D[G_OF, 2 * T_OF]), f32(D[G_OF, 2 * T_OF + 1]), f32(D[G_OF + 8, 2 * T_OF]),
            f32(D[G_OF + 8, 2 * T_OF + 1])]


def _truncated_sum(terms: torch.Tensor) -> torch.Tensor:
    """Sum over the last axis as the truncation model adds: every term cut toward zero to a multiple of the
    fp32 unit in the last place of the largest term, exact sum, then cut to fp32 toward zero."""
    big = terms.abs().amax(-1, keepdim=True)
    ulp = torch.where(big > 0, torch.exp2(torch.floor(torch.log2(big.clamp_min(1e-300))) - 23), torch.ones_like(big))
    s = (torch.trunc(terms / ulp) * ulp).sum(-1)
    su = torch.where(s != 0, torch.exp2(torch.floor(torch.log2(s.abs().clamp_min(1e-300))) - 23), torch.ones_like(s))
    return torch.trunc(s / su) * su


ACC_MODEL = "round"  # "round": exact products, one rounding to fp32; "truncate": _truncated_sum


def mma(a, b, c):
    """m16n8k16 with fp32 accumulation on fp16 fragments packed two per uint32 (per lane)."""
    return mma_values(a_matrix(*a), b_matrix(*b), c)


def mma_values(A, B, c):
    """D = A B + C (``a_of`` / ``b_of`` matrices, C per lane) as ACC_MODEL accumulates: one rounding to fp32, or
    the truncating model."""
    C = c_to_matrix(c)
    if ACC_MODEL == "round":
        return matrix_to_c(A @ B + C)
    terms = torch.cat([A[:, None, :] * B.t()[None, :, :], C[..., None]], -1)  # [16, 8, 17]: products and C
    return matrix_to_c(_truncated_sum(terms))


def bytes_of(reg):
    """uint32 (int64 tensor) -> [32, 4] its bytes, byte j at bits 8j."""
    return torch.stack([(reg >> (8 * j)) & 0xFF for j in range(4)], -1)


def imma(a, b):
    """u8 x s8 -> s32 MMA from zero: a = (a0, a1[, a2, a3]) A fragments (row g / g + 8, cols 4t + j [+ 16]), b =
    (b0[, b1]) B fragments (rows 4t + j [+ 16], col g): m16n8k32 with four A registers, m16n8k16 with two."""
    k = 16 * len(b)
    A = torch.zeros(16, k, dtype=torch.int64)
    B = torch.zeros(k, 8, dtype=torch.int64)
    cols = 4 * T_OF[:, None] + torch.arange(4)[None]  # [32, 4]
    for i, reg in enumerate(a):
        A[(G_OF + 8 * (i & 1))[:, None], cols + 16 * (i >> 1)] = bytes_of(reg)
    for i, reg in enumerate(b):
        sb = bytes_of(reg)
        B[cols + 16 * i, G_OF[:, None]] = torch.where(sb > 127, sb - 256, sb)
    C = A @ B
    return [C[G_OF, 2 * T_OF], C[G_OF, 2 * T_OF + 1], C[G_OF + 8, 2 * T_OF], C[G_OF + 8, 2 * T_OF + 1]]


def movmatrix_t(x):
    """movmatrix.m8n8.trans.b16: lane (g, t) holds row g, cols 2t, 2t+1 -> the same of the transpose."""
    lo, hi = halves(x)
    M = torch.zeros(8, 8)
    M[G_OF, 2 * T_OF], M[G_OF, 2 * T_OF + 1] = lo, hi
    Mt = M.t()
    return pack(Mt[G_OF, 2 * T_OF], Mt[G_OF, 2 * T_OF + 1])


def shfl(x, src):
    return x[src]


def xor_reduce(x, op, offs):
    for o in offs:
        x = op(x, x[LANES ^ o])
    return x


def ring_tile(pool, blk, kvh, D, log8=False):
    """The kernel's cp.async of one tile into a ring slot and its shared-memory reads, on byte arrays.
    pool: dict of the tile16 tensors (k_codes [nb, Hkv, 16, D/4] uint8, k_scale ... [nb, Hkv, 16, 1] fp16; log8:
    uint8 bytes, a 64-byte tail of 16 bytes each, read as one 16-bit K pair and one 32-bit V quad per lane).
    Returns per lane: kw, vw (lists of NW uint32), ksc, kzr (uint32), vsc, vzr ((x, y) uint32)."""
    NW = D // 32
    SB = 1 if log8 else 2  # bytes per scale / zero
    codes = {n: pool[n].flatten() for n in ("k_codes", "v_codes")}
    meta = [pool[n].contiguous().view(torch.uint8).flatten() for n in ("k_scale", "k_zero", "v_scale", "v_zero")]
    hkv = pool["k_codes"].shape[1]
    c_sblk, c_sh = hkv * 16 * D // 4, 16 * D // 4  # bytes
    s_sblk, s_sh = hkv * 16, 16  # elements
    smem = torch.full((8 * D + 64 * SB,), 0xAB, dtype=torch.uint8)  # garbage where nothing lands
    for lane in range(32):
        if NW == 4:
            src = blk * c_sblk + kvh * c_sh + 16 * lane
            smem[16 * lane : 16 * lane + 16] = codes["k_codes"][src : src + 16]
            smem[4 * D + 16 * lane : 4 * D + 16 * lane + 16] = codes["v_codes"][src : src + 16]
        else:
            src = blk * c_sblk + kvh * c_sh + 16 * (lane & 15)
            smem[16 * lane : 16 * lane + 16] = codes["k_codes" if lane < 16 else "v_codes"][src : src + 16]
        if lane < 4 * SB:  # the tail: k_scale | k_zero | v_scale | v_zero, 16 SB bytes each
            mi = (lane >> 1) & 3 if SB == 2 else lane
            src = (blk * s_sblk + kvh * s_sh) * SB + 16 * (lane & 1 if SB == 2 else 0)
            smem[8 * D + 16 * lane : 8 * D + 16 * lane + 16] = meta[mi][src : src + 16]

    def u32(off):
        b = smem[off : off + 4].to(torch.int64)
        return int(b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24))

    per_lane = lambda f: torch.tensor([f(ln) for ln in range(32)])  # noqa: E731
    kw = [per_lane(lambda ln, w=w: u32(4 * NW * ln + 4 * w)) for w in range(NW)]
    vw = [per_lane(lambda ln, w=w: u32(4 * D + 4 * NW * ln + 4 * w)) for w in range(NW)]
    if log8:  # ld.shared.u16 of tokens (g, g + 8) for K, ld.shared.u32 of tokens 2t, 2t + 1, 2t + 8, 2t + 9 for V
        ksc = per_lane(lambda ln: u32(8 * D + 2 * (ln >> 2)) & 0xFFFF)
        kzr = per_lane(lambda ln: u32(8 * D + 16 + 2 * (ln >> 2)) & 0xFFFF)
        nil = torch.zeros(32, dtype=torch.int64)
        vsc = (per_lane(lambda ln: u32(8 * D + 32 + 4 * (ln & 3))), nil)
        vzr = (per_lane(lambda ln: u32(8 * D + 48 + 4 * (ln & 3))), nil)
        return kw, vw, ksc, kzr, vsc, vzr
    ksc = per_lane(lambda ln: u32(8 * D + 4 * (ln >> 2)))
    kzr = per_lane(lambda ln: u32(8 * D + 32 + 4 * (ln >> 2)))
    vsc = (per_lane(lambda ln: u32(8 * D + 64 + 8 * (ln & 3))), per_lane(lambda ln: u32(8 * D + 68 + 8 * (ln & 3))))
    vzr = (per_lane(lambda ln: u32(8 * D + 96 + 8 * (ln & 3))), per_lane(lambda ln: u32(8 * D + 100 + 8 * (ln & 3))))
    return kw, vw, ksc, kzr, vsc, vzr


def log8_tables(k_top: int):
    """The decode kernel's per-CTA log8 tables: K 2^(-e/32) (exp2f, fp32) times 2^k_top, V 2^(-e/32) in fp16; NaN at
    255 (a non-finite row)."""
    v = torch.exp2(-0.03125 * torch.arange(256, dtype=F32))
    v[255] = float("nan")
    return v * 2.0**k_top, h(v)


def log8_decode(kb, zb, ktab):
    """K scale (fp32, the table) and zero in units of that scale (zb / 4 - 32 = zq / 4, the float magic) of bytes."""
    return ktab[kb], zb.to(F32) / 4 - 32


def emulate_warp(q, pool, table, kvh, length, scale_log2, flush=K_FLUSH, fold_z=True, signed=True, pair=False,
                 log8=None):
    """One warp over all INT2 tiles of KV head ``kvh`` of one sequence (block ids ``table``). q [G, D]
    float32 (bf16 values). Returns out [G, D] (float32). ``flush`` / ``fold_z`` / ``signed``: the fold interval,
    whether sum p z is folded with the offsets, and the even / odd offsets of unpack8 (the kernel before the
    seventeenth session: 32, False, False; its first fix: 8, True, False).

    ``pair`` (G <= 4, the kernel's paired-tile path): tiles go two at a time, tile a's heads on the MMAs'
    columns 0-3, tile b's on 4-7 (where G <= 4 heads leave them empty otherwise): the score MMAs of both
    accumulate into one fragment (B = q8 on columns 0-3 for tile a, on 4-7 for tile b), so the join, the
    scale / zero algebra, the softmax, the movmatrix and the l / sum p z and offset MMAs run once per pair;
    the V MMAs take P' with the other tile's columns zeroed. Columns n and n + 4 are two softmax streams of
    head n (own running max), merged at the end.

    ``log8`` = (k_top, v_top): the records' scale / zero are log8 bytes (template SF 1): K scales from the table
    with 2^k_top in it and the logit ks (S + (zq / 4) sum q'); V scales in units of 2^v_top from the fp16 table, the
    zero zq / 4 in units of its scale as rows 2 (PAIR: and 3) of the sp MMA (sum p' zq / 4 = sum p z), folded from
    sp; 2^v_top on the output."""
    G, D = q.shape
    KS, NW = D // 16, D // 32
    g, t = G_OF, T_OF
    assert not pair or G <= 4
    # ---- prologue: int8 q per head, B operands of the MMA of field P (register r, byte j = dim (D/4) P + 16 r
    # + 4t + j of head g), sigma / 64 and sum q' of the heads of columns 2t, 2t + 1
    QR = D // 64

    def q8_operands(head_of_lane):
        qrow = torch.zeros(32, D)
        ok = (head_of_lane >= 0) & (head_of_lane < G)
        qrow[ok] = q[head_of_lane[ok]]
        # lanes (g, *) hold one head: the row's absmax is the kernel's 2-step shuffle reduction over t
        q8f, sig = int8_rows(qrow * torch.tensor(scale_log2, dtype=F32))
        q8i = q8f.to(torch.int64)  # [32 lanes, D]
        ops = [[None] * QR for _ in range(4)]
        for P in range(4):
            for r in range(QR):
                dims = (D // 4) * P + 16 * r + 4 * t[:, None] + torch.arange(4)[None]
                by = q8i.gather(1, dims) & 0xFF
                ops[P][r] = by[:, 0] | (by[:, 1] << 8) | (by[:, 2] << 16) | (by[:, 3] << 24)
        return ops, sig[:, 0], q8i  # sigma = amax / 127

    q8, sig, q8i = q8_operands(g)
    q8b = q8_operands(g - 4)[0] if pair else None  # tile b: head g - 4 on column g
    qsum = sig * q8i.sum(-1).float()
    c0 = 8 * (t & 1) if pair else 8 * t  # the lane (g = head) holding column 2t's head
    qs0, qs1 = shfl(qsum, c0), shfl(qsum, c0 + 4)
    sg0, sg1 = shfl(sig / 64.0, c0), shfl(sig / 64.0, c0 + 4)
    acc = [[torch.zeros(32) for _ in range(4)] for _ in range(KS)]
    sp = [torch.zeros(32) for _ in range(4)]
    lz = [torch.zeros(32) for _ in range(4)]
    m0, m1 = torch.full((32,), -1e30), torch.full((32,), -1e30)
    # lz's A rows: 0 = ones (l), 1 = v_zero of tile a (sum p z of columns 0-3), 2 = v_zero of tile b (columns 4-7)
    ZR = 2 if log8 else 1  # the first z row: of lz (fp16 records) or of sp (log8)
    z_rows = (g == ZR) | (g == ZR + 1) if pair else g == ZR
    lz_keep = torch.where(z_rows, 0xFFFFFFFF, 0).to(torch.int64)
    lz_ones = torch.where(g == 0, 0x3C003C00, 0).to(torch.int64)
    zero = torch.zeros(32, dtype=torch.int64)
    k1024 = torch.full((32,), 0x64006400, dtype=torch.int64)
    keep_a = torch.where(g < 4, 0xFFFFFFFF, 0).to(torch.int64)  # B fragment lanes of tile a's columns
    z_src = 4 * ZR + (torch.where(t >= 2, 4, 0) if pair else 0) + t  # the lane holding this lane's columns' z row
    if log8:
        ktab, vtab = log8_tables(log8[0])
    ntile = (length + 15) // 16
    step = 2 if pair else 1

    def valid_of(k):  # tokens of tile k that exist (16, the partial tile's count, 0 past the end)
        return max(0, min(16, length - 16 * k))

    for k in range(0, ntile, step):
        tiles = [ring_tile(pool, int(table[j]), kvh, D, bool(log8)) for j in range(k, min(k + step, ntile))]
        ta_, tb_ = tiles[0], tiles[-1]  # a missing tile b: tile a's registers, every token masked
        kw, vw, ksc, kzr, (vs_x, vs_y), (vz_x, vz_y) = ta_
        r = []
        for P in range(4):  # the K side: codes masked in place (bytes = 4^P c), one integer MMA per field P and tile
            m = 0x03030303 << (2 * P)
            r.append(imma([kw[w] & m for w in range(NW)], q8[P]))
            if pair and len(tiles) == 2:
                rb = imma([tb_[0][w] & m for w in range(NW)], q8b[P])
                r[P] = [r[P][i] + rb[i] for i in range(4)]
        va_n, vb_n = valid_of(k), (valid_of(k + 1) if pair else 0)
        if pair:  # per-lane sources: C layout columns 4-7 (t >= 2), B layout columns g >= 4, lz row 2 -> tile b
            selC, selB, selZ = t >= 2, g >= 4, g == ZR + 1
            ksc, kzr = torch.where(selC, tb_[2], ksc), torch.where(selC, tb_[3], kzr)
            vs_x, vs_y = torch.where(selB, tb_[4][0], vs_x), torch.where(selB, tb_[4][1], vs_y)
            vz_x, vz_y = torch.where(selZ, tb_[5][0], vz_x), torch.where(selZ, tb_[5][1], vz_y)
            validC = torch.where(selC, vb_n, va_n)
            validB = torch.where(selB, vb_n, va_n)
            validZ = torch.where(selZ, vb_n, va_n)
        else:
            validC = validB = validZ = torch.full((32,), va_n)
        S = [f32(r[0][i] * 64 + r[1][i] * 16 + r[2][i] * 4 + r[3][i]) * (sg1 if i & 1 else sg0) for i in range(4)]
        if log8:  # logit = ks (S + kz QS), kz in units of ks; V scale / zero from the bytes, as fp16 pairs
            ks0, kz0 = log8_decode(ksc & 0xFF, kzr & 0xFF, ktab)
            ks1, kz1 = log8_decode(ksc >> 8, kzr >> 8, ktab)
            S = [kz0 * qs0 + S[0], kz0 * qs1 + S[1], kz1 * qs0 + S[2], kz1 * qs1 + S[3]]
            kz0 = kz1 = torch.zeros(32)
            vb = [(vs_x >> (8 * j)) & 0xFF for j in range(4)]
            zb = [(vz_x >> (8 * j)) & 0xFF for j in range(4)]
            vs_x, vs_y = pack(vtab[vb[0]], vtab[vb[1]]), pack(vtab[vb[2]], vtab[vb[3]])
            vz_x, vz_y = (pack(zb[0].to(F32) / 4 - 32, zb[1].to(F32) / 4 - 32),
                          pack(zb[2].to(F32) / 4 - 32, zb[3].to(F32) / 4 - 32))
        else:
            ks0, ks1 = halves(ksc)
            kz0, kz1 = halves(kzr)
        e = [ks0 * S[0] + (kz0 * qs0 - m0), ks0 * S[1] + (kz0 * qs1 - m1),
             ks1 * S[2] + (kz1 * qs0 - m0), ks1 * S[3] + (kz1 * qs1 - m1)]
        short = bool((validC < 16).any())
        if short or bool(torch.stack([x > K_SLACK for x in e]).any()):
            c = [ks0 * S[0] + kz0 * qs0, ks0 * S[1] + kz0 * qs1, ks1 * S[2] + kz1 * qs0, ks1 * S[3] + kz1 * qs1]
            if short:
                c[0] = torch.where(g >= validC, -math.inf, c[0])
                c[1] = torch.where(g >= validC, -math.inf, c[1])
                c[2] = torch.where(g + 8 >= validC, -math.inf, c[2])
                c[3] = torch.where(g + 8 >= validC, -math.inf, c[3])

                def tok_mask(valid):  # tokens 2t, 2t + 1 (x) and 2t + 8, 2t + 9 (y) of the lane's fragment
                    tx, ty = 2 * t, 2 * t + 8
                    return (torch.where(tx < valid, 0xFFFF, 0) | torch.where(tx + 1 < valid, 0xFFFF0000, 0),
                            torch.where(ty < valid, 0xFFFF, 0) | torch.where(ty + 1 < valid, 0xFFFF0000, 0))

                (bx, by), (zx, zy) = tok_mask(validB), tok_mask(validZ)
                vs_x, vs_y, vz_x, vz_y = vs_x & bx, vs_y & by, vz_x & zx, vz_y & zy
            mx0 = xor_reduce(torch.maximum(c[0], c[2]), torch.maximum, (4, 8, 16))
            mx1 = xor_reduce(torch.maximum(c[1], c[3]), torch.maximum, (4, 8, 16))
            n0, n1 = torch.maximum(m0, mx0), torch.maximum(m1, mx1)
            al0, al1 = torch.exp2(m0 - n0), torch.exp2(m1 - n1)
            m0, m1 = n0, n1
            e = [c[0] - n0, c[1] - n1, c[2] - n0, c[3] - n1]
            off = offsets(sp, t, signed)
            zz0, zz1 = (shfl(sp[0], z_src), shfl(sp[1], z_src)) if log8 else (torch.zeros(32), torch.zeros(32))
            for i in range(KS):
                o, w0 = off(i), float(4 ** v_field(i))
                acc[i] = [(zz0 * w0 + (acc[i][0] - o[0])) * al0, (zz1 * w0 + (acc[i][1] - o[1])) * al1,
                          (zz0 * 4 * w0 + (acc[i][2] - o[2])) * al0, (zz1 * 4 * w0 + (acc[i][3] - o[3])) * al1]
            sp = [torch.zeros(32) for _ in range(4)]
            lz = [lz[0] * al0, lz[1] * al1, lz[2], lz[3]]
        pm0 = movmatrix_t(pack(torch.exp2(e[0]), torch.exp2(e[1])))
        pm1 = movmatrix_t(pack(torch.exp2(e[2]), torch.exp2(e[3])))
        if log8:  # l only; sum p z goes to sp's z rows below
            lz = mma((lz_ones, zero, lz_ones, zero), (pm0, pm1), lz)
        else:
            lz = mma((lop3(vz_x, lz_keep, lz_ones), zero, lop3(vz_y, lz_keep, lz_ones), zero), (pm0, pm1), lz)
        pa, pb = halves(pm0), halves(pm1)
        va, vb = halves(vs_x), halves(vs_y)
        b0 = pack(h(pa[0] * va[0]), h(pa[1] * va[1]))
        b1 = pack(h(pb[0] * vb[0]), h(pb[1] * vb[1]))
        if signed:  # rows 0 / 1: sum p' of even / odd tokens (the low / high half of each register)
            ind = torch.where(g == 0, 0x00003C00, torch.where(g == 1, 0x3C000000, 0)).to(torch.int64)
            if log8:  # rows ZR, ZR + 1 += sum p' zq / 4
                sp = mma((lop3(vz_x, lz_keep, ind), zero, lop3(vz_y, lz_keep, ind), zero), (b0, b1), sp)
            else:
                sp = mma((ind, zero, ind, zero), (b0, b1), sp)
        else:
            sp = mma((k1024, k1024, k1024, k1024), (b0, b1), sp)
        for j, (_, vwj, *_) in enumerate(tiles):
            bj = (b0, b1) if not pair else ((b0 & keep_a, b1 & keep_a) if j == 0 else (b0 & ~keep_a, b1 & ~keep_a))
            for w in range(NW):
                a = unpack8(vwj[w], signed)
                acc[2 * w] = mma((a[0], a[1], a[4], a[5]), bj, acc[2 * w])
                acc[2 * w + 1] = mma((a[2], a[3], a[6], a[7]), bj, acc[2 * w + 1])
        if (k + step) % flush == 0 or k + step >= ntile:  # the fold (kernel: flush(), every kFlushTiles tiles)
            zs = sp if log8 else lz
            z0, z1 = (shfl(zs[0], z_src), shfl(zs[1], z_src)) if fold_z else (torch.zeros(32), torch.zeros(32))
            off = offsets(sp, t, signed)
            for i in range(KS):
                w0 = float(4 ** v_field(i))
                w1 = 4 * w0
                o = off(i)
                acc[i] = [f32(z0.double() * w0 + f32(acc[i][0] - o[0]).double()),
                          f32(z1.double() * w0 + f32(acc[i][1] - o[1]).double()),
                          f32(z0.double() * w1 + f32(acc[i][2] - o[2]).double()),
                          f32(z1.double() * w1 + f32(acc[i][3] - o[3]).double())]
            sp = [torch.zeros(32) for _ in range(4)]
            if fold_z and not log8:
                lz = [torch.where(z_rows, 0.0, lz[0]), torch.where(z_rows, 0.0, lz[1]), lz[2], lz[3]]
    # ---- epilogue: per column n the numerator (acc - offset) 4^-P + sum p z, l and the running max
    l0, l1 = shfl(lz[0], t), shfl(lz[1], t)
    zs = sp if log8 else lz
    z0, z1 = shfl(zs[0], z_src), shfl(zs[1], z_src)
    vt = 2.0 ** log8[1] if log8 else 1.0  # log8: V in units of 2^v_top until here
    z0, z1 = z0 * vt, z1 * vt
    num, den, mx = torch.zeros(8, D), torch.zeros(8), torch.zeros(8)
    den[2 * t], den[2 * t + 1], mx[2 * t], mx[2 * t + 1] = l0, l1, m0, m1
    off = offsets(sp, t, signed)
    for i in range(KS):
        u0 = vt / float(4 ** v_field(i))
        u1 = u0 * 0.25
        o = off(i)
        num[2 * t, 16 * i + g] = (acc[i][0] - o[0]) * u0 + z0
        num[2 * t + 1, 16 * i + g] = (acc[i][1] - o[1]) * u0 + z1
        num[2 * t, 16 * i + g + 8] = (acc[i][2] - o[2]) * u1 + z0
        num[2 * t + 1, 16 * i + g + 8] = (acc[i][3] - o[3]) * u1 + z1
    if pair:  # head n's two streams (columns n, n + 4), merged as two splits are: rescaled to their common max
        M = torch.maximum(mx[:4], mx[4:])
        wa, wb = torch.exp2(mx[:4] - M), torch.exp2(mx[4:] - M)
        return ((num[:4] * wa[:, None] + num[4:] * wb[:, None]) / (den[:4] * wa + den[4:] * wb)[:, None])[:G]
    return (num / den[:, None])[:G]


def _random_case(d, G, length, logit_scale, seed, log8=None):
    """Random INT2 tokens (codes, fp16 scale / zero) of one sequence on KV head 1 of a tile16 pool with shuffled
    blocks, a bf16 query of G heads, and the reference: float64 attention over the dequantized tokens with the
    kernel's int8 query. Returns q, pool, table, scale_log2, ref. ``log8`` = (k_top, v_top): scale / zero as log8
    bytes (scale 2^(top - e / 32), zero = scale (zb - 128) / 4; quant/format.py)."""
    gen = torch.Generator().manual_seed(seed)
    nblk = (length + 15) // 16
    codes_k = torch.randint(0, 4, (nblk, 16, d), generator=gen)
    codes_v = torch.randint(0, 4, (nblk, 16, d), generator=gen)
    if log8:  # stored bytes; the values they mean, in float64
        ks, vs = (torch.randint(24, 120, (nblk, 16), generator=gen, dtype=torch.uint8) for _ in range(2))
        kz = torch.randint(104, 128, (nblk, 16), generator=gen, dtype=torch.uint8)  # zq -24 .. -1: K ~ ks (c - 3)
        vz = torch.randint(96, 160, (nblk, 16), generator=gen, dtype=torch.uint8)
        sv = {n: torch.exp2(top - b.double() / 32) for n, b, top in (("k", ks, log8[0]), ("v", vs, log8[1]))}
        K = sv["k"][..., None] * (codes_k.double() + (kz.double()[..., None] - 128) / 4)
        V = sv["v"][..., None] * (codes_v.double() + (vz.double()[..., None] - 128) / 4)
    else:
        ks = (0.05 + torch.rand(nblk, 16, generator=gen)).half()
        kz = (-1.5 * ks.float() + 0.1 * torch.randn(nblk, 16, generator=gen)).half()
        vs = (0.05 + torch.rand(nblk, 16, generator=gen)).half()
        vz = (torch.randn(nblk, 16, generator=gen)).half()
        K = ks.double()[..., None] * codes_k.double() + kz.double()[..., None]
        V = vs.double()[..., None] * codes_v.double() + vz.double()[..., None]
    q = (torch.randn(G, d, generator=gen) * logit_scale).bfloat16().float()
    sm_scale = d**-0.5
    K, V = K.reshape(-1, d)[:length], V.reshape(-1, d)[:length]
    ref = torch.softmax(int8_query(q, sm_scale).double() @ K.t() * sm_scale, -1) @ V
    nb = nblk + 3
    table = torch.randperm(nb, generator=gen)[:nblk]
    pool = {}
    for which, codes, sc, zr in (("k", codes_k, ks, kz), ("v", codes_v, vs, vz)):
        c = torch.randint(0, 4, (nb, 2, 16, d), generator=gen)
        c[table, 1] = codes
        pool[f"{which}_codes"] = codes_to_tile16(pack_codes(c.to(torch.uint8), 2), which)
        for name, x in (("scale", sc), ("zero", zr)):
            full = (torch.randint(0, 255, (nb, 2, 16, 1), generator=gen, dtype=torch.uint8) if log8
                    else torch.randn(nb, 2, 16, 1, generator=gen).half())
            full[table, 1] = x[..., None]
            pool[f"{which}_{name}"] = scales_to_tile16(full, which)
    return q, pool, table, sm_scale * 1.4426950408889634, ref


def _rel_err(out, ref):
    return float((out.double() - ref).norm() / ref.norm())


# the last case has a query element at a rounding tie of the int8 step: the emulation's own 127.0 / amax (torch:
# a product with the reciprocal, one ulp low) rounded it the other way from the kernel and the reference, 2.4e-2
# off (found by a random sweep of 1,871 cases, nineteenth session); both now round with reference.int8_rows
@pytest.mark.parametrize("d,G,length,logit_scale,seed", [(128, 4, 16 * 19, 1.0, None), (64, 8, 16 * 9 + 5, 3.0, None),
                                                          (128, 1, 16 * 3 + 1, 0.3, None), (64, 2, 16 * 17, 6.0, None),
                                                          (128, 4, 16 * 70 + 3, 2.0, None), (64, 1, 112, 6.0, 124878)])
def test_emulated_int2_tile_loop_matches_attention(d, G, length, logit_scale, seed):
    q, pool, table, scale_log2, ref = _random_case(d, G, length, logit_scale, d + G + length if seed is None else seed)
    for pair in (False, True) if G <= 4 else (False,):
        err = _rel_err(emulate_warp(q, pool, table, 1, length, scale_log2, pair=pair), ref)
        assert err < 2e-3, (pair, err)


@pytest.mark.parametrize("d,G,length,logit_scale,tops", [(128, 4, 16 * 19, 1.0, (1, 0)), (64, 8, 16 * 9 + 5, 3.0, (2, -1)),
                                                          (128, 1, 16 * 3 + 1, 0.3, (0, 1)), (64, 2, 16 * 70 + 3, 6.0, (1, 2)),
                                                          (128, 3, 16 * 40 + 7, 2.0, (-1, 0))])
def test_emulated_int2_tile_loop_log8_records(d, G, length, logit_scale, tops):
    """The same loop on log8 records (template SF 1): K scales from the fp32 table with 2^k_top, the K zero in units
    of its scale inside the logit, V scales in units of 2^v_top as fp16, sum p z as sp rows 2 / 3 (B = p') folded from
    sp, and 2^v_top on the output; with paired tiles where G <= 4 (the eighteenth-session path whose first log8 form
    scaled tile b's zero by tile a's V scale, forty-eighth session). Against float64 attention over the tokens the
    bytes mean (exact 2^(top - e / 32); the kernel's V table is fp16, within the tolerance)."""
    q, pool, table, scale_log2, ref = _random_case(d, G, length, logit_scale, 900 + d + G + length, log8=tops)
    for pair in (False, True) if G <= 4 else (False,):
        err = _rel_err(emulate_warp(q, pool, table, 1, length, scale_log2, pair=pair, log8=tops), ref)
        assert err < 2e-3, (pair, err)


def test_emulated_int2_tile_loop_on_random_shapes():
    """30 random cases: head_dim 64 / 128, 1-8 query heads per KV head, 1-241 tokens (partial tiles, single
    tiles, an odd tile count for the pairs), logit scales 0.3-10 (flat to peaked: the slow path's rescale); paired
    tiles too where G <= 4. A sweep of 1,375 such cases (G <= 4,
    nineteenth session) found at most 4.8e-4 from float64 attention, hence 1e-3 here."""
    rng = random.Random(19)
    worst = (0.0, None)
    for _ in range(30):
        d, G = rng.choice([64, 128]), rng.choice([1, 2, 3, 4, 8])
        length = rng.choice([1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49]) + 16 * rng.randint(0, 12)
        case = (d, G, length, rng.choice([0.3, 1.0, 3.0, 6.0, 10.0]), rng.randint(0, 10**6))
        q, pool, table, scale_log2, ref = _random_case(*case)
        for pair in (False, True) if G <= 4 else (False,):
            err = _rel_err(emulate_warp(q, pool, table, 1, length, scale_log2, pair=pair), ref)
            worst = max(worst, (err, case, pair))
    assert worst[0] < 1e-3, worst


def _flat_case(ntok, d=128, G=4, seed=0):
    """Keys and values ~N(0, 1) quantized as the cache does, q giving a flat softmax (score std 1): the first
    layer of a model at long context, where the output (an average) is small next to the values."""
    from oscarkv.quant import QuantConfig
    from oscarkv.quant.format import quantize, unpack_codes

    gen = torch.Generator().manual_seed(seed)
    nblk = ntok // 16
    kq = quantize(torch.randn(ntok, 1, d, generator=gen).bfloat16().float(), QuantConfig(group_size=d, clip_ratio=0.96))
    vq = quantize(torch.randn(ntok, 1, d, generator=gen).bfloat16().float(), QuantConfig(group_size=d, clip_ratio=0.92))
    q = torch.randn(G, d, generator=gen).bfloat16().float()
    deq = lambda Q: (Q.scale.double() * unpack_codes(Q.codes, 2).double() + Q.zero.double())[:, 0]  # noqa: E731
    ref = torch.softmax(int8_query(q, d**-0.5).double() @ deq(kq).t() * d**-0.5, -1) @ deq(vq)
    pool = {}
    for which, Q in (("k", kq), ("v", vq)):
        c = unpack_codes(Q.codes, 2).reshape(nblk, 16, 1, d).permute(0, 2, 1, 3)
        pool[f"{which}_codes"] = codes_to_tile16(pack_codes(c.to(torch.uint8), 2), which)
        for name in ("scale", "zero"):
            pool[f"{which}_{name}"] = scales_to_tile16(getattr(Q, name).reshape(nblk, 16, 1, 1).permute(0, 2, 1, 3).half(), which)
    return q, pool, torch.arange(nblk), ref


def test_emulated_offsets_survive_the_truncating_accumulation_on_a_flat_softmax(monkeypatch):
    """Issue 8's 128K gap, reproduced by the emulation: under the tensor core's truncating fp32 accumulation
    (ACC_MODEL "truncate") a flat softmax over 1024 tokens in one warp is 2.4e-2 from the float64 reference with
    one offset 1024 sum p' folded every 32 tiles and sum p z at the end (the kernel before the seventeenth
    session; the H200 measured 5.2% at 131,072 tokens), 3.9e-3 with both folded every 8 tiles (its first fix;
    H200 0.8%), and 1.8e-3 with the even / odd offsets folded every 32 tiles (the kernel now), as with
    round-to-nearest accumulation (1.7e-3: the fp16 rounding of p and p'); so are paired tiles (1.68e-3)."""
    q, pool, table, ref = _flat_case(1024)
    sl2 = 128**-0.5 * 1.4426950408889634
    err = {}
    for model in ("round", "truncate"):
        monkeypatch.setattr(sys.modules[__name__], "ACC_MODEL", model)
        for name, kw in (("old", dict(flush=32, fold_z=False, signed=False)), ("8 tiles", dict(flush=8, signed=False)),
                         ("now", {}), ("paired", dict(pair=True))):
            out = emulate_warp(q, pool, table, 0, 1024, sl2, **kw)
            err[model, name] = float((out.double() - ref).norm() / ref.norm())
    floor = err["round", "now"]
    assert floor < 3e-3 and err["round", "old"] < 3e-3, err
    assert err["truncate", "old"] > 1e-2, err  # the model shows the effect the H200 measured
    assert err["truncate", "8 tiles"] < 0.3 * err["truncate", "old"], err
    assert err["truncate", "now"] < 1.3 * floor, err  # the offsets cancel: nothing left of the truncation
    # paired tiles (variants 10 / 11): two streams per head, each with its own even / odd offsets
    assert err["round", "paired"] < 1.1 * floor and err["truncate", "paired"] < 1.3 * floor, err
