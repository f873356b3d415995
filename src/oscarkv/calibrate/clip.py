"""Fitting the clip ratio rho per layer (spec section 2: the released code has no fitting; this is
the spec's [inferred] recipe).

For every candidate rho we quantize -> dequantize the *rotated* rows with the same ``QuantConfig``
as serving (bits, group size, scale dtype, levels) and measure the error that attention sees:

    K: mean over (token, head) of e C_h e^T,  e = k_hat - k (rotated),  C_h = R^T C_Q^(h) R
       (= mean squared error of the logits q.k over the head's queries)
    V: mean over (token, head) of wbar_{h,t} |v_hat - v|^2   (score-weighted, wbar mean 1 per head)

rho = 1.0 means "no clipping" and is always a candidate, so a fitted ratio never does worse than
no clipping on the calibration data.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ..quant import QuantConfig, clamp_rows, clip_index, fake_quantize
from ..rotation import rotate
from ..errors import InputError

DEFAULT_CLIP_K, DEFAULT_CLIP_V = 0.96, 0.92  # the paper's global ratios (spec section 2), used when not fitted
DEFAULT_CLIP_GRID = tuple(round(0.80 + 0.02 * i, 2) for i in range(11))  # 0.80, 0.82, ..., 1.00


def check_grid(grid) -> tuple[float, ...]:
    g = tuple(sorted({float(r) for r in grid}))
    if not g or any(not (0.0 < r <= 1.0) for r in g):
        raise InputError(f"clip candidates must lie in (0, 1], got {grid}")
    if 1.0 not in g:
        g = g + (1.0,)  # always compare against "off"
    return g


def clip_config(base: QuantConfig, rho: float) -> QuantConfig:
    return replace(base, clip_ratio=rho if rho < 1.0 else None)


def grid_errors(x: torch.Tensor, grid, base: QuantConfig, metric) -> torch.Tensor:
    """metric(e) summed error for each candidate; x are rotated float32 rows ``[..., d]``.

    Same result as quantize(x, clip_config(base, rho)) per candidate (tested), but |x| is sorted once
    for all candidates instead of once per candidate inside ``clip_rows``."""
    d = x.shape[-1]
    x = x.float()
    srt = x.abs().sort(dim=-1).values
    cfg = clip_config(base, 1.0)  # rows are clipped here, exactly as clip_rows does it
    done: dict[int, float] = {}
    out = []
    for rho in grid:
        key = clip_index(rho, d)  # candidates with the same sort index clip identically
        if key not in done:
            xc = x if rho >= 1.0 else clamp_rows(x, srt[..., key : key + 1])
            e = (fake_quantize(xc, cfg) - x).double()  # fake_quantize: no packing (the hot loop)
            done[key] = float(metric(e))
        out.append(done[key])
    return torch.tensor(out, dtype=torch.float64)


def pick(grid, errors: torch.Tensor) -> float:
    """The candidate with the smallest error; ties go to the larger rho (less clipping)."""
    best, best_err = None, float("inf")
    for rho, err in sorted(zip(grid, errors.tolist()), reverse=True):
        if err < best_err * (1 - 1e-12):
            best, best_err = rho, err
    return best


class KeyClipSearch:
    """K search: the K rotation and C_Q are final after pass 1; ``update`` takes K rows in batches."""

    def __init__(self, rot: torch.Tensor, cq: torch.Tensor, base: QuantConfig, grid, query_rot: torch.Tensor | None = None):
        self.rot, self.base, self.grid = rot, base, tuple(grid)
        # logit error (q Q).e with Q the queries' transform (= rot when rot is orthogonal)
        r = (rot if query_rot is None else query_rot).double().to(cq.device)  # [1 or H, d, d]
        self.c = r.transpose(-1, -2) @ cq @ r  # [H, d, d], logit-error metric in rotated coordinates
        self.err = torch.zeros(len(self.grid), dtype=torch.float64)
        self.count = 0

    def update(self, k: torch.Tensor) -> None:
        x = rotate(k.float(), self.rot.to(k.device))  # exactly what serving quantizes
        c = self.c.to(k.device)
        self.err += grid_errors(x, self.grid, self.base, lambda e: ((e @ c) * e).sum())
        self.count += k.shape[0] * k.shape[1] * k.shape[2]

    def errors(self) -> torch.Tensor:
        return self.err / max(self.count, 1)


def value_clip_errors(v: torch.Tensor, wbar: torch.Tensor, rot: torch.Tensor, base: QuantConfig, grid) -> torch.Tensor:
    """V errors on sampled tokens: v ``[N, H, d]`` raw values, wbar ``[N, H]`` normalised weights."""
    x = rotate(v.float().transpose(0, 1)[None], rot)  # [1, H, N, d]
    w = wbar.double().transpose(0, 1)[None]  # [1, H, N]
    errs = grid_errors(x, grid, base, lambda e: (w * e.pow(2).sum(-1)).sum())
    return errs / max(w.numel(), 1)
