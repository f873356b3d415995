"""Lloyd-Max INT2 levels fitted offline on calibration data (issue #4).

Departure from the authors (spec section 3.3): they use fixed Gaussian Lloyd-Max boundaries on a
per-row z-score. We instead fit four reconstruction levels per layer (K and V separately) on the
data they will be applied to: the rotated rows, min/max-normalised after clipping exactly as
``quantize`` does it, i.e. positions u = (x - zero) / scale in code units (mostly in [0, 2**bits - 1];
see ``code_positions`` for why unclipped values are used as targets). Each sample is
weighted by scale**2 (so the fit minimises the value-domain squared error, not the code-unit one)
times an optional per-row weight (the score weight wbar for V). Started from the uniform levels,
Lloyd iterations never increase that weighted error, so the fitted levels beat uniform on the fit data.
"""

from __future__ import annotations

import torch

from ..quant import QuantConfig, group_scale_zero, scale_zero_values


def code_positions(x: torch.Tensor, cfg: QuantConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(u, scale) per value, both shaped like ``x``: clip, grouping and scale/zero from
    ``quant.group_scale_zero``, the function ``quantize`` uses.

    u is the position of the *unclipped* value (it can leave [0, 2**bits - 1] where clipping acted):
    the error that matters is against the original value, and clipped values still get the same
    nearest level (the end one) as their clipped position. Fitting on clipped positions instead
    pulled the end levels inward and made held-out errors worse than uniform."""
    xg, scale, zero = group_scale_zero(x, cfg)
    scale, zero = (t[..., None] for t in scale_zero_values(scale, zero, cfg))
    u = (x.float().reshape(xg.shape) - zero) / scale
    return u.reshape(x.shape), scale.expand_as(xg).reshape(x.shape)


def weighted_mse(u: torch.Tensor, weight: torch.Tensor, levels: torch.Tensor) -> float:
    """Weighted squared distance of each u to its nearest level (the level ``quantize`` would pick)."""
    lv = levels.double()
    idx = torch.bucketize(u.double().contiguous(), (lv[1:] + lv[:-1]) / 2, right=True)
    return float((weight.double() * (u.double() - lv[idx]) ** 2).sum() / weight.double().sum().clamp_min(1e-300))


def fit_levels(u: torch.Tensor, weight: torch.Tensor | None = None, n_levels: int = 4, iters: int = 200,
               tol: float = 1e-7) -> torch.Tensor:
    """Weighted 1-D Lloyd-Max on code positions u (flattened), from uniform levels 0..n-1.

    Returns float64 ``[n_levels]`` levels, sorted, within [0, n_levels - 1]. An empty cell keeps its level.
    u is sorted once; each iteration then only needs a search for the n - 1 cell boundaries and prefix
    sums, so iterations are O(n_levels log N) instead of O(N).
    """
    u = u.reshape(-1).double()
    w = torch.ones_like(u) if weight is None else weight.reshape(-1).double()
    order = torch.argsort(u)
    us, ws = u[order], w[order]
    zero = torch.zeros(1, dtype=torch.float64)
    cw = torch.cat([zero, ws.cumsum(0)])
    cwu = torch.cat([zero, (ws * us).cumsum(0)])
    top = n_levels - 1
    lv = torch.arange(n_levels, dtype=torch.float64)
    for _ in range(iters):
        # cell j = {bounds[j-1] <= u < bounds[j]}: the same tie rule as bucketize(..., right=True) in quantize
        cuts = torch.searchsorted(us, (lv[1:] + lv[:-1]) / 2, right=False)
        edges = torch.cat([torch.zeros(1, dtype=torch.long), cuts, torch.tensor([us.numel()])])
        wsum = cw[edges[1:]] - cw[edges[:-1]]
        usum = cwu[edges[1:]] - cwu[edges[:-1]]
        new = torch.where(wsum > 0, usum / wsum.clamp_min(1e-300), lv).clamp(0, top).sort().values
        done = (new - lv).abs().max() < tol
        lv = new
        if done:
            break
    return lv


def fit_layer_levels(x: torch.Tensor, cfg: QuantConfig, row_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Levels for rotated rows x ``[..., d]`` under ``cfg`` (its clip ratio applies; its levels are ignored).

    row_weight ``x.shape[:-1]``: optional per-row weight (V: the normalised score weight)."""
    u, scale = code_positions(x, cfg)
    w = scale.double() ** 2
    if row_weight is not None:
        w = w * row_weight.double()[..., None]
    return fit_levels(u, w, cfg.n_levels)
