"""Capture the q, k, v that a transformers decoder hands to its attention function.

We register our own attention function (plus the sdpa mask builder under the same name) with
transformers' ``AttentionInterface`` and switch the model to it for the duration of a ``with`` block.
Every Llama/Qwen2/Qwen3-family attention module calls that interface after projection, per-head
norm (Qwen3 q_norm/k_norm) and RoPE, and after ``cache.update``, so with ``use_cache=False`` we see
exactly the tensors of spec section 1.1: post-RoPE Q ``[B, H_q, T, d]``, post-RoPE K and raw V
``[B, H_kv, T, d]``. The function then delegates to sdpa, so the forward pass is unchanged.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch
from ..errors import InputError

CAPTURE_IMPL = "oscarkv_capture"


@dataclass(frozen=True)
class AttentionDims:
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def group(self) -> int:
        return self.num_heads // self.num_kv_heads


def text_config(model):
    cfg = model.config
    return getattr(cfg, "get_text_config", lambda: cfg)()


def attention_dims(model) -> AttentionDims:
    """Layer/head counts from the model config, with clear errors for shapes OSCAR cannot handle."""
    cfg = text_config(model)
    try:
        n_layers, n_heads = int(cfg.num_hidden_layers), int(cfg.num_attention_heads)
    except AttributeError:
        raise InputError(
            f"{type(model).__name__} has no num_hidden_layers/num_attention_heads in its config; "
            "calibration supports decoder-only transformers models (Llama, Qwen2, Qwen3, ...)"
        ) from None
    n_kv = int(getattr(cfg, "num_key_value_heads", None) or n_heads)
    d = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads)
    if n_heads % n_kv:
        raise InputError(f"{n_heads} query heads are not a multiple of {n_kv} KV heads")
    if d <= 0 or d & (d - 1):
        raise InputError(
            f"head_dim {d} is not a power of two; OSCAR's Hadamard-based rotations need a power-of-two "
            "head_dim (e.g. 32, 64, 128, 256)"
        )
    return AttentionDims(n_layers, n_heads, n_kv, d)


def _register(fn: Callable) -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(CAPTURE_IMPL, fn)
    # Without a mask builder registered under our name transformers would build no causal mask at all.
    AttentionMaskInterface.register(CAPTURE_IMPL, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


@contextlib.contextmanager
def capture_attention(model, callback: Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], None]):
    """Within the block, each attention call invokes ``callback(layer, q, k, v)`` then runs sdpa.

    ``layer`` is the module's ``layer_idx`` (Llama/Qwen modules all have one). The previous attention
    implementation is restored on exit, also on error.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def fn(module, query, key, value, attention_mask, **kwargs):
        layer = getattr(module, "layer_idx", None)
        if layer is None:
            raise InputError(f"attention module {type(module).__name__} has no layer_idx; cannot tell layers apart")
        callback(int(layer), query.detach(), key.detach(), value.detach())
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    _register(fn)
    cfgs = {id(c): c for c in (model.config, text_config(model))}.values()
    old = [(c, c._attn_implementation) for c in cfgs]
    try:
        # Set the attribute directly: set_attn_implementation() validates names against kernels it knows.
        for c, _ in old:
            c._attn_implementation = CAPTURE_IMPL
        yield
    finally:
        for c, impl in old:
            c._attn_implementation = impl


@torch.no_grad()
def run_forward(model, input_ids: torch.Tensor) -> None:
    """One prefill forward without a KV cache (so attention sees exactly this batch's keys)."""
    dev = next(model.parameters()).device
    ids = input_ids.to(dev)
    inner = getattr(model, "model", None)  # skip the LM head: logits are not needed
    target = inner if inner is not None and hasattr(inner, "layers") else model
    target(input_ids=ids, use_cache=False)


def check_all_layers(seen: set[int], dims: AttentionDims, model) -> None:
    missing = sorted(set(range(dims.num_layers)) - seen)
    if missing:
        raise InputError(
            f"{type(model).__name__}: attention of layers {missing[:8]}{'...' if len(missing) > 8 else ''} never "
            "reached transformers' AttentionInterface; calibration supports attention modules that dispatch "
            "through it (Llama, Qwen2, Qwen3, Mistral, ...), not linear-attention or custom-kernel layers"
        )


@torch.no_grad()
def capture_qkv(model, input_ids: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(q, k, v) per layer for one batch ``input_ids [B, T]`` (float32, on CPU). For tests and evaluation."""
    dims = attention_dims(model)
    out: dict[int, tuple] = {}

    def cb(layer, q, k, v):
        out[layer] = (q.float().cpu(), k.float().cpu(), v.float().cpu())

    with capture_attention(model, cb):
        run_forward(model, input_ids if input_ids.ndim == 2 else input_ids[None])
    check_all_layers(set(out), dims, model)
    return [out[i] for i in range(dims.num_layers)]
