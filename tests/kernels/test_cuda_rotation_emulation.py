"""Lane-by-lane emulation of the append's rotation CTAs (``rotate_cta`` in ``cuda/int2_paged.cu``) on CPU.

With R_K fused into the append (``write_kv(..., rotation=, q=, q_out=)``) the CUDA kernel computes Y = X R for
the new K rows and the step's queries with mma.m16n8k16: X rows on M, R on B split into halves hi + lo of the
model's dtype (hi: R rounded, lo: R - hi rounded), one warp per 8 output dims and all its m-tiles, CTAs of 32 rows
staged in shared memory as element pairs. CI has no GPU,
so this replays the kernel's indexing (which thread stages which word of X, which lane reads which word of the
staged rows and of R, where each accumulator goes) with the PTX fragment layouts of
``test_cuda_emulation`` (``a_of`` / ``b_of`` / ``mma_values``) and checks it against ``rotation.rotate_with_keys``,
the rule the torch and Triton backends apply. A wrong
fragment index shows up as an O(1) error; hi + lo keeps the sums within ~2^-16 of fp32, so after the one
rounding to bf16 nearly every element equals the reference and none is more than one bf16 ulp away (or, where a
sum cancels to next to nothing, more than fp32's own rounding of the terms).
"""

import pytest
import torch

from test_cuda_emulation import G_OF as G, T_OF as T, a_of, b_of, mma_values

from oscarkv.rotation import rotate_with_keys

ROT_COLS, WARPS = 32, 16  # kRotCols, kAppendWarps


def _rotate_ctas(x: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """The kernel's Y = X R for the rows x [nx, D] (bf16) of one KV head with its R [D, D] (fp32), CTA by CTA and
    warp by warp as ``rotate_cta`` indexes them; Y rounded to bf16 as the kernel stores it."""
    nx, D = x.shape
    KS, NTO = D // 16, D // 8
    NG = WARPS // NTO
    bf = lambda v: v.to(torch.bfloat16).double()  # noqa: E731
    xd = x.double()
    Y = torch.full((nx, D), float("nan"), dtype=torch.float64)
    for c0 in range(0, nx, ROT_COLS):
        # staging: thread tid stores word e = tid + i * 32 WARPS of the tile (row e // (D / 2), word e % (D / 2), a
        # pair of elements), zeros past nx
        xs = torch.full((ROT_COLS, D // 2, 2), float("nan"), dtype=torch.float64)
        per = ROT_COLS * (D // 2) // (32 * WARPS)
        for tid in range(32 * WARPS):
            for i in range(per):
                e = tid + i * 32 * WARPS
                r, w = e // (D // 2), e % (D // 2)
                xs[r, w] = xd[c0 + r, 2 * w:2 * w + 2] if c0 + r < nx else 0.0
        assert not xs.isnan().any(), "a staged word was never written"
        for warp in range(WARPS):
            nt, grp = warp % NTO, warp // NTO
            # B = R: b[ks][i] = R[16 ks + 2 t + 8 i (+ 1)][8 nt + g], as hi and lo halves
            bhi, blo = [], []
            for ks in range(KS):
                hi_k, lo_k = [], []
                for i in range(2):
                    r = [R[16 * ks + 2 * T + 8 * i + e, 8 * nt + G].double() for e in range(2)]
                    hi = [bf(v) for v in r]
                    hi_k.append(hi)
                    lo_k.append([bf(v - h) for v, h in zip(r, hi)])
                bhi.append(hi_k)
                blo.append(lo_k)
            if c0 + 16 * grp >= nx:  # the warp has no row of X: it returns
                continue
            # the warp's m-tiles mt = grp + m NG side by side (MW = 2 at D = 128); rows past nx are staged zeros,
            # computed and not stored
            for mt in range(grp, ROT_COLS // 16, NG):
                xb = c0 + 16 * mt
                rows = [xb + G, xb + G + 8]  # A rows of registers 0 / 2 and 1 / 3
                ok = [r < nx for r in rows]
                acc = [torch.zeros(32, dtype=torch.float64) for _ in range(4)]
                for ks in range(KS):
                    # a[i] = staged word 8 ks + t + 4 (i >> 1) of tile row 16 mt + g + 8 (i & 1)
                    a = [[xs[16 * mt + G + 8 * (i & 1), 8 * ks + T + 4 * (i >> 1), e] for e in range(2)] for i in range(4)]
                    A = a_of(a)
                    acc = mma_values(A, b_of(bhi[ks]), acc)
                    acc = mma_values(A, b_of(blo[ks]), acc)
                for i in range(4):  # acc[i] = Y[xb + g + 8 (i >> 1)][8 nt + 2 t + (i & 1)]
                    r, col = rows[i >> 1], 8 * nt + 2 * T + (i & 1)
                    m = ok[i >> 1]
                    Y[r[m], col[m]] = bf(acc[i][m])
    assert not Y.isnan().any(), "an output element was never written"
    return Y


@pytest.mark.parametrize("d,hq,hkv,rows", [(64, 8, 2, 3), (128, 8, 2, 1), (128, 4, 4, 20), (64, 2, 2, 70), (128, 16, 2, 5)])
def test_emulated_rotation_ctas_equal_rotate_with_keys(d, hq, hkv, rows):
    g = torch.Generator().manual_seed(d + rows)
    R = torch.linalg.qr(torch.randn(hkv, d, d, generator=g, dtype=torch.float64))[0].float()
    k = torch.randn(rows, hkv, d, generator=g).bfloat16()
    q = (torch.randn(rows, hq, d, generator=g) * 3).bfloat16()
    qr, kr = rotate_with_keys(q.unsqueeze(2), k.unsqueeze(2), R)
    want_k, want_q = kr.squeeze(2).double(), qr.squeeze(2).double()
    grp = hq // hkv
    for h in range(hkv):
        # X rows of KV head h: the new K rows, then query (r, h * grp + j) at n_rows + r * grp + j
        x = torch.cat([k[:, h], q[:, h * grp:(h + 1) * grp].reshape(rows * grp, d)])
        y = _rotate_ctas(x, R[h])
        got_k, got_q = y[:rows], y[rows:].reshape(rows, grp, d)
        for got, want in ((got_k, want_k[:, h]), (got_q, want_q[:, h * grp:(h + 1) * grp])):
            # one bf16 ulp, or fp32's own rounding where a sum cancels to next to nothing
            ulp = torch.exp2(torch.floor(torch.log2(want.abs().clamp_min(1e-30))) - 7)
            assert ((got - want).abs() <= ulp * 1.001 + 1e-5 * x.abs().max().double()).all()
            assert (got == want).double().mean() >= 0.99
