"""Exact, zero-cost centering of K and V (not in the OSCAR paper; issue 10). The ONE home of this math:
the CPU cache, the banded evaluation, the kernels' reference write path and the GPU/vLLM paths call
these functions and nothing else.

Keys. For a fixed vector mu_K (per KV head), q.(k - mu_K) = q.k - q.mu_K is the same shift for every
key a query attends to, so softmax(q.K^T) is unchanged when *every* key of the sequence (sink, INT2
history and recent window alike) is stored as k - mu_K. Nothing is added back on the key side.

Values. The attention weights p_t sum to 1, so sum_t p_t (v_t - mu_V) + mu_V = sum_t p_t v_t: store
v - mu_V everywhere and add mu_V to the attention output (per query head, GQA-expanded), or fold
W_o mu_V into o_proj's bias (``value_mean_bias``; ``enable_oscar_attention`` does it where it absorbs R_V^T into
o_proj). In a rotated basis (rows stored as (v - mu_V) R_V) the output correction
is mu_V R_V before un-rotating, i.e. ``rotated_mean(mu_V, R_V)``.

Why: post-RoPE keys of Qwen2-family models (q/k/v projections with bias) carry a per-channel offset of
up to ~150 against a spread of ~1; a token-wise INT2/INT4 row spends its whole range on that offset.
Removing a calibrated mean costs one vector subtraction at write time (fused into the rotation's
input) and, for V, one vector add per output (or nothing with the o_proj bias), and is exact.

Shapes: x is ``[..., H, T, d]`` (heads at dim -3, as K/V everywhere in this package); a mean is
``[H, d]`` or ``[1, d]`` (one per layer, broadcast over heads) or None (no centering: x unchanged).
"""

from __future__ import annotations

import torch
from ..errors import InputError


def _as_rows(mean: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    if mean.ndim != 2 or mean.shape[-1] != x.shape[-1] or mean.shape[0] not in (1, x.shape[-3]):
        raise InputError(f"mean must be [H or 1, d] for rows {tuple(x.shape)}, got {tuple(mean.shape)}")
    return mean.to(device=x.device, dtype=x.dtype)[:, None, :]  # [H, 1, d] broadcasts over [..., H, T, d]


def center(x: torch.Tensor, mean: torch.Tensor | None) -> torch.Tensor:
    """x - mean, per head (rows ``[..., H, T, d]``). Call it on K and V *before* rotating/quantizing."""
    return x if mean is None else x - _as_rows(mean, x)


def uncenter(x: torch.Tensor, mean: torch.Tensor | None) -> torch.Tensor:
    """x + mean (the inverse of ``center``), for reading stored rows back in the model's basis."""
    return x if mean is None else x + _as_rows(mean, x)


def rotated_mean(mean: torch.Tensor | None, rotation: torch.Tensor | None) -> torch.Tensor | None:
    """mean expressed in the rotated basis: ``[H, d] @ R`` (R ``[R, d, d]`` with R in {1, H})."""
    if mean is None or rotation is None:
        return mean
    return torch.matmul(mean[:, None, :].to(rotation.dtype), rotation.to(mean.device))[:, 0, :]


def value_output_mean(v_mean: torch.Tensor | None, num_query_heads: int) -> torch.Tensor | None:
    """mu_V expanded to query heads ``[H_q, d]`` (contiguous GQA grouping, query head j -> KV head
    j // (H_q / H_kv)): add it to the attention output ``[B, H_q, T, d]`` (as ``out + m[:, None]``)
    when the values were stored centered."""
    if v_mean is None:
        return None
    h = v_mean.shape[0]
    if h == 1:
        return v_mean.expand(num_query_heads, -1)
    if num_query_heads % h:
        raise InputError(f"{num_query_heads} query heads are not a multiple of {h} KV heads")
    return v_mean.repeat_interleave(num_query_heads // h, dim=0)


def value_mean_bias(o_weight: torch.Tensor, v_mean: torch.Tensor | None) -> torch.Tensor | None:
    """o_proj's share of mu_V, ``W_o concat_h(mu_V of head h)`` ``[hidden]`` in float32: added to o_proj's bias
    it stands for ``add_value_mean`` before o_proj (W_o ``[hidden, H_q d]`` linear, so W_o (o + m) = W_o o + W_o m),
    and costs nothing per step where the step's GEMM adds the bias. ``v_mean`` ``[H_kv or 1, d]`` in the basis
    o_proj takes (the rotated one for an o_proj with R_V^T absorbed)."""
    if v_mean is None:
        return None
    d = v_mean.shape[-1]
    if o_weight.ndim != 2 or o_weight.shape[1] % d:
        raise InputError(f"o_proj weight must be [hidden, H_q * {d}], got {tuple(o_weight.shape)}")
    m = value_output_mean(v_mean, o_weight.shape[1] // d).reshape(-1)
    return o_weight.float() @ m.to(o_weight.device, torch.float32)


def add_value_mean(out: torch.Tensor, v_mean: torch.Tensor | None, heads_dim: int = 1) -> torch.Tensor:
    """Attention output + mu_V. ``out`` is ``[B, H_q, T, d]`` (heads_dim=1) or ``[B, T, H_q, d]``
    (heads_dim=2); ``v_mean`` is ``[H_kv or 1, d]`` in the same basis as ``out``."""
    if v_mean is None:
        return out
    m = value_output_mean(v_mean, out.shape[heads_dim]).to(out.device, out.dtype)
    return out + (m[:, None, :] if heads_dim == 1 else m[None, :, :])
