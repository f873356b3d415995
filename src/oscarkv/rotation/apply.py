"""Applying per-layer or per-head rotations to K/V rows, queries, attention outputs and o_proj.

The one rule: rows x (last dim d, heads along ``head_axis``) times R, or R^T with ``inverse=True``.
R is ``[d, d]`` or ``[R, d, d]`` with R dividing the head count H of x: head h uses ``r[h // (H // R)]``.
So R = 1 is one rotation per layer, R = H one per head, and R = H_kv applied to H_q query heads gives
every query head its KV head's rotation (GQA groups are consecutive query heads, as in transformers).
Math runs in float32 (float64 for float64 rows); the result has x's dtype.
"""

from __future__ import annotations

import torch

from ..errors import InputError


def expand_heads(r: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``[R, d, d]`` -> ``[num_heads, d, d]`` by the rule above (head h gets ``r[h // (num_heads // R)]``);
    R = 1 and R = num_heads are returned as they are (they broadcast). For callers that prepare the
    per-head matrices once (e.g. before CUDA-graph capture)."""
    if r.dim() == 2 or r.shape[0] in (1, num_heads):
        return r
    if num_heads % r.shape[0]:
        raise InputError(f"{r.shape[0]} rotations cannot be shared by {num_heads} heads (not a divisor)")
    return r.repeat_interleave(num_heads // r.shape[0], dim=0)  # query head h -> rotation of its KV head


def rotate(x: torch.Tensor, r: torch.Tensor | None, *, inverse: bool = False, head_axis: int = -3) -> torch.Tensor:
    """x @ R (``inverse``: x @ R^T) per head. ``head_axis``: -3 for ``[..., H, T, d]`` (cache rows,
    queries in transformers' layout), -2 for ``[..., H, d]`` (decode queries, ``[B, T, H, d]`` outputs)."""
    if r is None:
        return x
    if head_axis == -2:
        return rotate(x.unsqueeze(-2), r, inverse=inverse).squeeze(-2)
    if head_axis != -3:
        raise InputError(f"head_axis must be -3 ([..., H, T, d]) or -2 ([..., H, d]), got {head_axis}")
    dt = torch.promote_types(x.dtype, torch.float32)  # at least float32 math (float64 stays float64)
    r = r.to(device=x.device, dtype=dt)
    if inverse:
        r = r.transpose(-1, -2)
    r = expand_heads(r, x.shape[-3])
    return torch.matmul(x.to(dt), r).to(x.dtype)


def rotate_with_keys(q: torch.Tensor, k: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``rotate(q, r)`` and ``rotate(k, r)`` for queries ``[B, Hq, T, d]`` and keys ``[B, Hkv, T, d]`` that share
    their KV head's matrix ``r`` ``[Hkv or 1, d, d]`` (``[d, d]``), as one GEMM per KV head (one GEMM when r is
    shared): a group's query heads and its key are rows of the same product, so each matrix is read once, not
    once per query head (a decode step's per-layer cost, issue 8)."""
    b, hq, t, d = q.shape
    hkv = k.shape[1]
    if hq % hkv or k.shape != (b, hkv, t, d):
        raise InputError(f"keys {tuple(k.shape)} do not match queries {tuple(q.shape)} in a GQA layout [B, H, T, d]")
    r = r.reshape(-1, d, d)
    if r.shape[0] not in (1, hkv):
        raise InputError(f"{r.shape[0]} rotations for {hkv} KV heads: give one per KV head or one per layer")
    g = hq // hkv
    x = torch.cat([q.reshape(b, hkv, g * t, d), k], dim=2)  # [B, Hkv, (g + 1) T, d]: a group's rows together
    n = x.shape[2]
    # rows of each matrix as one "head" of rotate's rule: [Hkv or 1, rows, d]
    y = rotate(x.transpose(0, 1).reshape(r.shape[0], -1, d), r).reshape(hkv, b, n, d).transpose(0, 1)
    return y[:, :, : g * t].reshape(b, hq, t, d), y[:, :, g * t:]


def unrotate(x: torch.Tensor, r: torch.Tensor | None, *, head_axis: int = -3) -> torch.Tensor:
    """x @ R^T: back to the model's basis (``rotate(..., inverse=True)``)."""
    return rotate(x, r, inverse=True, head_axis=head_axis)


def fold_v_rotation_into_o_proj(w_o: torch.Tensor, r_v: torch.Tensor, num_q_heads: int) -> torch.Tensor:
    """W_o ``[hidden, num_q_heads * d]`` -> W_o' with o_rot @ W_o'^T == (o_rot @ R_V^T) @ W_o^T.

    Per head h: W_o'[:, h] = W_o[:, h] @ R_V (R of h's KV head when per head), so attention can return
    the rotated output o_rot and skip the explicit unrotation (the spec marks this as possible, 5.1)."""
    hidden = w_o.shape[0]
    w = w_o.float().view(hidden, num_q_heads, -1)  # [hidden, Hq, d]: per head the rows act like "x"
    return rotate(w, r_v, head_axis=-2).reshape(hidden, -1).to(w_o.dtype)
