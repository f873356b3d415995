"""Applying per-layer or per-head rotations to K/V rows, queries, attention outputs and o_proj.

The one rule: rows x (last dim d, heads along ``head_axis``) times R, or R^T with ``inverse=True``.
R is ``[d, d]`` or ``[R, d, d]`` with R dividing the head count H of x: head h uses ``r[h // (H // R)]``.
So R = 1 is one rotation per layer, R = H one per head, and R = H_kv applied to H_q query heads gives
every query head its KV head's rotation (GQA groups are consecutive query heads, as in transformers).
Math runs in float32; the result has x's dtype.
"""

from __future__ import annotations

import torch


def rotate(x: torch.Tensor, r: torch.Tensor | None, *, inverse: bool = False, head_axis: int = -3) -> torch.Tensor:
    """x @ R (``inverse``: x @ R^T) per head. ``head_axis``: -3 for ``[..., H, T, d]`` (cache rows,
    queries in transformers' layout), -2 for ``[..., H, d]`` (decode queries, ``[B, T, H, d]`` outputs)."""
    if r is None:
        return x
    if head_axis == -2:
        return rotate(x.unsqueeze(-2), r, inverse=inverse).squeeze(-2)
    if head_axis != -3:
        raise ValueError(f"head_axis must be -3 ([..., H, T, d]) or -2 ([..., H, d]), got {head_axis}")
    r = r.to(device=x.device, dtype=torch.float32)
    if inverse:
        r = r.transpose(-1, -2)
    if r.dim() == 3 and r.shape[0] not in (1, x.shape[-3]):
        h, n = x.shape[-3], r.shape[0]
        if h % n:
            raise ValueError(f"{n} rotations cannot be shared by {h} heads (not a divisor)")
        r = r.repeat_interleave(h // n, dim=0)  # query head h -> rotation of its KV head
    return torch.matmul(x.float(), r).to(x.dtype)


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
