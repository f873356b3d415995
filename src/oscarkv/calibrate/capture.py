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
from typing import Callable

import torch
from ..errors import InputError

from ..dims import AttentionDims, attention_dims, text_config

CAPTURE_IMPL = "oscarkv_capture"


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
    dims = attention_dims(model, power_of_two=True)
    out: dict[int, tuple] = {}

    def cb(layer, q, k, v):
        out[layer] = (q.float().cpu(), k.float().cpu(), v.float().cpu())

    with capture_attention(model, cb):
        run_forward(model, input_ids if input_ids.ndim == 2 else input_ids[None])
    check_all_layers(set(out), dims, model)
    return [out[i] for i in range(dims.num_layers)]
