"""Paged mixed-precision KV kernels: INT2 decode attention, fused quantize-and-append, prefill.

Thin typed API in the FlashInfer / vLLM style. Layouts (see ``paged.py`` and ``layout.py``):

    q                   [batch, num_q_heads, head_dim]                      rotated by R_K (or pass k_rotation)
    int2 codes          [num_int2_blocks, num_kv_heads, block_size, head_dim // 4]   uint8
    int2 scale / zero   [num_int2_blocks, num_kv_heads, block_size, num_groups]
    hp (BF16) K / V     [num_hp_blocks, num_kv_heads, block_size, head_dim]
    block tables        [batch, max_blocks] int32 per tier, lengths [batch] int32 per tier
    slot mappings       [num_rows] int64, slot = block * block_size + offset, -1 = none

The INT2 tensors come in two layouts (``MixedKVPool.layout``): "logical" (quartered rows, exactly the
``oscarkv.quant`` format; Triton kernels) and "tile16" (block_size 16, one group per row: the same tensors
with the bits of each (block, head) in the CUDA kernel's MMA-fragment order, stored as views of one contiguous
record per (block, head): ``paged.tile16_records``; ``layout.py`` has the torch transform both ways and
``convert_pool``). The torch reference ops (``reference.py``: ``gather_sequence``,
``write_kv_torch``, ``decode_attention_torch``) and ``prefill_attention`` read and write either layout.

Kernels: ``cuda_ops`` (CUDA C++ built at first use with nvcc; decode for tile16 pools, one launch per
layer with ``DecodePlan`` made once per step; page-wise append), ``triton_decode`` / ``triton_append``
(portable fallback on logical pools; CI runs them under ``TRITON_INTERPRET=1``) and the torch reference.
``backend="auto"`` picks the fastest one that supports the call; "cuda" / "triton" / "torch" force one.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from ..errors import InputError, StateError, UnsupportedError

from . import cuda_ops
from .cuda_ops import CudaDecodeConfig, CudaKernelUnavailable, DecodePlan
from .layout import codes_from_tile16, codes_to_tile16, convert_pool

from .paged import (
    NULL_BLOCK,
    BlockAllocator,
    BlockOwnershipError,
    DecodeMeta,
    MixedKVCache,
    MixedKVPool,
    OutOfBlocksError,
    TRITON_GPU_MIN_HEAD_DIM,
    WritePlan,
    check_kernel_configs,
)
from .checks import check_decode_meta, check_write_plan
from .prefill import prefill_attention
from ..rotation import fold_v_rotation_into_o_proj, rotate, rotate_with_keys, unrotate  # the one per-head rule (rotation/apply.py)
from .reference import decode_attention_torch, gather_sequence, write_kv_torch

__all__ = [
    "NULL_BLOCK",
    "BlockAllocator",
    "BlockOwnershipError",
    "CudaDecodeConfig",
    "CudaKernelUnavailable",
    "DecodePlan",
    "TritonDecodeConfig",
    "codes_from_tile16",
    "codes_to_tile16",
    "convert_pool",
    "DecodeMeta",
    "MixedKVCache",
    "MixedKVPool",
    "OutOfBlocksError",
    "WritePlan",
    "check_kernel_configs",
    "decode_attention",
    "fold_v_rotation_into_o_proj",
    "gather_sequence",
    "prefill_attention",
    "rotate_q",
    "unrotate_v",
    "write_kv",
]


KERNEL_BACKENDS = ("auto", "cuda", "triton", "torch")


def check_kernel_backend(backend: str, device) -> str:
    """``backend`` can run on ``device`` (the rule ``write_kv`` / ``decode_attention`` apply to each call;
    the paged ``OscarCache`` applies it once, before its first forward writes anything)."""
    if backend not in KERNEL_BACKENDS:
        raise InputError(f"backend must be 'auto', 'cuda', 'triton' or 'torch', got {backend!r}")
    if backend == "triton" and torch.device(device).type != "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1":
        raise StateError("backend='triton' on CPU tensors needs TRITON_INTERPRET=1 set before triton is imported")
    return backend


def _backend(backend: str, t: torch.Tensor) -> str:
    return check_kernel_backend(backend, t.device)


def rotate_q(q: torch.Tensor, r_k: torch.Tensor) -> torch.Tensor:
    """q_rot = q @ R_K (query head h uses its KV head's R when R is per head): ``rotation.rotate``."""
    return rotate(q, r_k, head_axis=-2)


def unrotate_v(o: torch.Tensor, r_v: torch.Tensor) -> torch.Tensor:
    """o = o_rot @ R_V^T: undo the V rotation on the attention output (``rotation.unrotate``)."""
    return unrotate(o, r_v, head_axis=-2)


@dataclass(frozen=True)
class TritonDecodeConfig:
    """Launch knobs of the portable Triton decode kernel (``triton_decode.decode_attention_triton``)."""

    block_n: int = 128
    block_n_hp: int = 64
    num_warps: int = 4
    num_stages: int = 3
    min_split_tokens: int = 256
    ctas_per_sm: int = 2
    asm_unpack: bool = True
    prefetch: bool = True
    n_hp_splits: int | None = None
    n_int2_splits: int | None = None


def decode_attention(
    q: torch.Tensor,
    pool: MixedKVPool,
    meta: DecodeMeta,
    *,
    sm_scale: float | None = None,
    k_rotation: torch.Tensor | None = None,
    v_rotation: torch.Tensor | None = None,
    backend: str = "auto",
    config: TritonDecodeConfig | CudaDecodeConfig | None = None,
    plan: DecodePlan | None = None,
    out: torch.Tensor | None = None,
    validate: bool = False,
) -> torch.Tensor:
    """Single-token decode attention over sink + INT2 history + recent.

    q ``[batch, num_q_heads, head_dim]``. With ``k_rotation`` q is rotated first (else it must already be
    rotated). With ``v_rotation`` the output is returned in the model's V space; without it the output
    stays rotated (fold R_V into o_proj with ``fold_v_rotation_into_o_proj``). Output dtype = q's dtype.

    backend: "auto" picks the CUDA kernel (``cuda_ops``) when the pool is in the tile16 layout and the
    shape is supported, else Triton on CUDA tensors, else the torch reference. "cuda" / "triton" /
    "torch" force one. ``plan`` (a ``DecodePlan`` made once per decode step and shared by all layers)
    avoids per-call host work and allocation for the CUDA kernel; without it one is made per call.
    ``config`` is the chosen kernel's typed config (``CudaDecodeConfig`` / ``TritonDecodeConfig``).

    Precision: the CUDA kernel scores the INT2 history with q rounded to int8 per head (step absmax / 127,
    ``reference.int8_query``; an output error of ~1% of the attention output, a few percent of what the
    INT2 cache itself costs: tests/kernels/test_paged.py); the sink / recent window and the other backends
    use q as given.

    ``validate=True`` first checks ``meta`` against ``pool`` and ``q`` (``checks.check_decode_meta``: block
    ids in range, no block read by two sequences, lengths within the tables): one device sync, for tables
    built by other code; off by default so the decode step is unchanged. Ownership against a
    ``MixedKVCache``: ``checks.check_owners(cache, seq_ids, meta=meta)``.
    """
    if validate:
        check_decode_meta(pool, meta, q)
    sm_scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    if k_rotation is not None:
        q = rotate_q(q, k_rotation)
    be = _backend(backend, q)
    if be == "auto":
        if plan is not None or (q.is_cuda and pool.layout == "tile16" and cuda_ops.unsupported_reason(q, pool) is None):
            be = "cuda"
        elif q.is_cuda and pool.layout == "logical" and q.shape[-1] >= TRITON_GPU_MIN_HEAD_DIM and not pool.k_cfg.log8:
            be = "triton"
        else:
            be = "torch"
    if be == "cuda":
        why = cuda_ops.unsupported_reason(q, pool)
        if why:
            raise cuda_ops.CudaKernelUnavailable(f"backend='cuda' cannot run this call: {why}")
        if plan is None:
            cfg = config if isinstance(config, CudaDecodeConfig) else None
            plan = DecodePlan(q.shape[0], q.shape[1], pool.num_kv_heads, pool.head_dim, meta, q.device, q.dtype, cfg,
                              scale_dtype=pool.k_cfg.scale_dtype)
        o = plan.run(q, pool, meta, sm_scale, out=out)
    elif be == "triton":
        _check_triton_scales(pool)
        if pool.layout != "logical":
            raise InputError(f"the Triton decode kernel reads the logical INT2 layout, the pool is {pool.layout!r}; "
                             "use backend='cuda' or convert_pool(pool, 'logical')")
        from .triton_decode import decode_attention_triton

        cfg = config if isinstance(config, TritonDecodeConfig) else TritonDecodeConfig()
        o = decode_attention_triton(q.contiguous(), pool, meta, sm_scale, out=out, **cfg.__dict__)
    else:
        o = decode_attention_torch(q, pool, meta, sm_scale).to(q.dtype)
        if out is not None:
            out.copy_(o)
            o = out
    return unrotate_v(o, v_rotation) if v_rotation is not None else o


def _check_triton_scales(pool: MixedKVPool) -> None:
    if pool.k_cfg.log8:
        raise UnsupportedError("the Triton kernels read float scale / zero; a log8 pool (QuantConfig(scale_dtype="
                               "'log8')) runs on backend='cuda' (tile16 layout) or backend='torch'")


def _check_fused_rotation(k, rotation, q, q_out) -> None:
    """One-line refusals for ``write_kv(..., rotation=, q=, q_out=)`` before anything is written."""
    rows, hkv, d = k.shape
    if rotation.dtype != torch.float32 or rotation.dim() != 3 or rotation.shape[1:] != (d, d) \
            or rotation.shape[0] not in (1, hkv) or not rotation.is_contiguous() or rotation.device != k.device:
        raise InputError(f"rotation must be a contiguous float32 [1 or {hkv}, {d}, {d}] tensor on {k.device}, got "
                         f"{rotation.dtype} {tuple(rotation.shape)} on {rotation.device}")
    if (q is None) != (q_out is None):
        raise InputError("give q and q_out together (the queries to rotate and where the rotated ones go)")
    if q is not None:
        if q.dim() != 3 or q.shape[0] != rows or q.shape[2] != d or q.shape[1] % hkv:
            raise InputError(f"q must be [{rows}, a multiple of {hkv} heads, {d}], got {tuple(q.shape)}")
        if q_out.shape != q.shape or q_out.dtype != k.dtype or not q_out.is_contiguous() or q_out.device != k.device:
            raise InputError(f"q_out must be a contiguous {k.dtype} tensor of q's shape {tuple(q.shape)} on {k.device}")


def write_kv(pool: MixedKVPool, k: torch.Tensor, v: torch.Tensor, plan: WritePlan, *, backend: str = "auto",
             validate: bool = False, rotation: torch.Tensor | None = None, q: torch.Tensor | None = None,
             q_out: torch.Tensor | None = None) -> None:
    """Fused clip + quantize + append of new rows ``[num_rows, num_kv_heads, head_dim]`` (rotated) per ``plan``,
    including demotion of recent BF16 rows into INT2 (see ``WritePlan``).

    ``rotation`` R_K ``[1 or num_kv_heads, head_dim, head_dim]`` float32: k arrives unrotated and is rotated
    here (``rotation.rotate_with_keys``' rule: x @ R per KV head in float32, rounded to k's dtype), and the
    step's queries ``q`` ``[num_rows, num_q_heads, head_dim]`` (when given) are rotated by their KV head's R
    into ``q_out`` (same shape, contiguous, q's dtype). The CUDA kernel does both inside its one launch (no
    rotation GEMM and no copies per layer and step, issue 8); the other backends rotate first, then write.

    "auto": the CUDA kernel for a tile16 pool on the GPU with a page-wise plan, else Triton on the GPU (either
    layout; tile16 rows by 2-bit field), else the torch reference (which handles both layouts).

    ``validate=True`` first checks the plan (``checks.check_write_plan``: slots in range or -1, none
    written twice, rows matching k/v) before anything is written; ownership against a ``MixedKVCache``:
    ``checks.check_owners(cache, seq_ids, plan=plan, num_new=...)``.
    """
    if validate:
        check_write_plan(pool, plan, k, v)
    if rotation is not None:
        _check_fused_rotation(k, rotation, q, q_out)
    be = _backend(backend, k)
    if be == "auto":
        if k.is_cuda and pool.layout == "tile16" and plan.page_dst is not None:
            be = "cuda"
        elif k.is_cuda and not pool.k_cfg.log8:
            be = "triton"
        else:
            be = "torch"
    if be == "cuda":
        cuda_ops.write_kv_cuda(pool, k, v, plan, rotation, q, q_out)
        return
    if rotation is not None:  # the reference rule, then the plain write
        if q is None:
            k = rotate(k.unsqueeze(2), rotation).squeeze(2)
        else:
            qr, kr = rotate_with_keys(q.unsqueeze(2), k.unsqueeze(2), rotation)
            q_out.copy_(qr.squeeze(2))
            k = kr.squeeze(2)
    if be == "triton":
        from .triton_append import write_kv_triton

        _check_triton_scales(pool)
        write_kv_triton(pool, k, v, plan)
    else:
        write_kv_torch(pool, k, v, plan)
