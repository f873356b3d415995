"""Paged mixed-precision KV kernels: INT2 decode attention, fused quantize-and-append, prefill.

Thin typed API in the FlashInfer / vLLM style. Layouts (see ``paged.py``):

    q                   [batch, num_q_heads, head_dim]                      rotated by R_K (or pass k_rotation)
    int2 codes          [num_int2_blocks, num_kv_heads, block_size, head_dim // 4]   uint8, quartered packing
    int2 scale / zero   [num_int2_blocks, num_kv_heads, block_size, num_groups]
    hp (BF16) K / V     [num_hp_blocks, num_kv_heads, block_size, head_dim]
    block tables        [batch, max_blocks] int32 per tier, lengths [batch] int32 per tier
    slot mappings       [num_rows] int64, slot = block * block_size + offset, -1 = none

Every op dispatches to Triton for CUDA tensors and to the torch reference (``reference.py``) otherwise;
``backend="triton"`` forces Triton (on CPU only under ``TRITON_INTERPRET=1``, set before importing triton).
"""

from __future__ import annotations

import math
import os

import torch

from .paged import (
    NULL_BLOCK,
    BlockAllocator,
    BlockOwnershipError,
    DecodeMeta,
    MixedKVCache,
    MixedKVPool,
    OutOfBlocksError,
    WritePlan,
    check_kernel_configs,
)
from .prefill import prefill_attention
from .reference import decode_attention_torch, gather_sequence, write_kv_torch

__all__ = [
    "NULL_BLOCK",
    "BlockAllocator",
    "BlockOwnershipError",
    "DecodeMeta",
    "MixedKVCache",
    "MixedKVPool",
    "OutOfBlocksError",
    "WritePlan",
    "check_kernel_configs",
    "choose_decode_kernel",
    "decode_attention",
    "fold_v_rotation_into_o_proj",
    "gather_sequence",
    "prefill_attention",
    "rotate_q",
    "unrotate_v",
    "write_kv",
]


def _backend(backend: str, t: torch.Tensor) -> str:
    if backend == "auto":
        return "triton" if t.is_cuda else "torch"
    if backend == "triton" and not t.is_cuda and os.environ.get("TRITON_INTERPRET", "0") != "1":
        raise RuntimeError("backend='triton' on CPU tensors needs TRITON_INTERPRET=1 set before triton is imported")
    if backend not in ("triton", "torch"):
        raise ValueError(f"backend must be 'auto', 'triton' or 'torch', got {backend!r}")
    return backend


def _per_head(x: torch.Tensor, r: torch.Tensor, transpose: bool) -> torch.Tensor:
    """x ``[..., H, d]`` times R (``[d, d]`` per layer or ``[num_kv_heads, d, d]`` per KV head), fp32 math."""
    r = r.to(device=x.device, dtype=torch.float32)
    r = r.transpose(-1, -2) if transpose else r
    xf = x.float()
    if r.dim() == 2:
        return (xf @ r).to(x.dtype)
    hkv, h = r.shape[0], x.shape[-2]
    xg = xf.unflatten(-2, (hkv, h // hkv))  # [..., Hkv, g, d]
    return torch.einsum("...kgd,kde->...kge", xg, r).flatten(-3, -2).to(x.dtype)


def rotate_q(q: torch.Tensor, r_k: torch.Tensor) -> torch.Tensor:
    """q_rot = q @ R_K (query head h uses its KV head's R when R is per head)."""
    return _per_head(q, r_k, transpose=False)


def unrotate_v(o: torch.Tensor, r_v: torch.Tensor) -> torch.Tensor:
    """o = o_rot @ R_V^T: undo the V rotation on the attention output."""
    return _per_head(o, r_v, transpose=True)


def fold_v_rotation_into_o_proj(w_o: torch.Tensor, r_v: torch.Tensor, num_q_heads: int) -> torch.Tensor:
    """W_o ``[hidden, num_q_heads * d]`` -> W_o' with o_rot @ W_o'^T == (o_rot @ R_V^T) @ W_o^T.

    Per head h: W_o'[:, h] = W_o[:, h] @ R_V (R of h's KV head when per head). Lets decode skip the
    explicit unrotation GEMM (the spec marks this as possible but not done).
    """
    hidden = w_o.shape[0]
    w = w_o.float().view(hidden, num_q_heads, -1)  # [hidden, Hq, d]; per head the rows act like "x"
    return _per_head(w, r_v, transpose=False).reshape(hidden, -1).to(w_o.dtype)


def decode_attention(
    q: torch.Tensor,
    pool: MixedKVPool,
    meta: DecodeMeta,
    *,
    sm_scale: float | None = None,
    k_rotation: torch.Tensor | None = None,
    v_rotation: torch.Tensor | None = None,
    backend: str = "auto",
    **tuning,
) -> torch.Tensor:
    """Single-token decode attention over sink + INT2 history + recent.

    q ``[batch, num_q_heads, head_dim]``. With ``k_rotation`` q is rotated first (else it must already be
    rotated). With ``v_rotation`` the output is returned in the model's V space; without it the output
    stays rotated (fold R_V into o_proj with ``fold_v_rotation_into_o_proj``). Output dtype = q's dtype.
    ``tuning`` goes to the Triton launcher (block_n, num_warps, num_stages, n_q_splits, ...), except
    ``kernel``: "mma" (``triton_decode``: tensor-core MMAs on raw codes), "fma" (``triton_decode_fma``:
    CUDA-core products for small GQA groups) or "auto" (default; see ``choose_decode_kernel``).
    """
    sm_scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if k_rotation is not None:
        q = rotate_q(q, k_rotation)
    if _backend(backend, q) == "triton":
        kernel = tuning.pop("kernel", "auto")
        if kernel == "auto":
            kernel = choose_decode_kernel(q.shape[0], q.shape[1] // pool.num_kv_heads, meta)
        if kernel == "fma":
            from .triton_decode_fma import decode_attention_triton_fma as run
        elif kernel == "mma":
            from .triton_decode import decode_attention_triton as run
        else:
            raise ValueError(f"kernel must be 'auto', 'mma' or 'fma', got {kernel!r}")
        out = run(q.contiguous(), pool, meta, sm_scale, **tuning)
    else:
        out = decode_attention_torch(q, pool, meta, sm_scale).to(q.dtype)
    return unrotate_v(out, v_rotation) if v_rotation is not None else out


def choose_decode_kernel(batch: int, group: int, meta: DecodeMeta) -> str:
    """Which Triton decode kernel ``kernel="auto"`` runs.

    "fma" would be chosen only where it measured faster on the H200. On 2026-12-02 (BENCHMARKS.md,
    "CUDA-core variant") it was slower than "mma" at every measured shape (4K-128K, batch 1-32, GQA 4:
    0.48-0.66x), so this is "mma" everywhere.
    """
    return "mma"


def write_kv(pool: MixedKVPool, k: torch.Tensor, v: torch.Tensor, plan: WritePlan, *, backend: str = "auto") -> None:
    """Fused clip + quantize + append of new rows ``[num_rows, num_kv_heads, head_dim]`` (rotated) per ``plan``,
    including demotion of the oldest recent BF16 rows into INT2 (see ``WritePlan``)."""
    if _backend(backend, k) == "triton":
        from .triton_append import write_kv_triton

        write_kv_triton(pool, k, v, plan)
    else:
        write_kv_torch(pool, k, v, plan)
