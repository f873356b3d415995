"""Memory accounting: effective bits per KV element and KV-cache bytes.

Paper accounting (spec section 3.4): the sink and recent windows are 16-bit, the INT2 history costs
``bits + 2 * scale_bits / group_size`` per element (one scale and one zero per group):

    BPE(L) = [(L - S - W) * (b + 2 * scale_bits / G) + min(L, S + W) * 16] / L

With S=64, W=256, G=128, b=2 and 16-bit scale/zero this gives 2.2836 at L=131072 (the paper's 2.28).
"""

from __future__ import annotations

import torch

from ..errors import InputError


def int2_len(t, sink: int, recent: int, page: int = 1):
    """THE window rule (TEAM decision 1): a sequence of ``t`` tokens holds the tokens
    [sink, sink + int2_len) quantized, ``int2_len = page * floor(max(0, t - sink - recent) / page)``: whole
    pages of ``page`` tokens leave the recent window together (page 1: token by token). ``t`` is an int or
    an integer tensor (then elementwise). Every cache, pool and plan takes its lengths from here."""
    over = t - sink - recent
    if torch.is_tensor(over):
        return torch.clamp(over, min=0) // page * page
    return max(0, over) // page * page


def int_region_bits(bits: int = 2, group_size: int = 128, scale_bits: int = 16, head_dim: int | None = None) -> float:
    """Bits per element of the quantized region (codes + one scale and one zero per group)."""
    g = min(group_size, head_dim) if head_dim else group_size
    return bits + 2.0 * scale_bits / g


def mixed_bits_per_element(context: float, quantized_tokens: float, int_bits: float, hp_bits: float = 16) -> float:
    """Average bits per element when ``quantized_tokens`` of ``context`` tokens cost ``int_bits`` each
    (``int_region_bits``) and the rest ``hp_bits``."""
    return (quantized_tokens * int_bits + (context - quantized_tokens) * hp_bits) / context


def effective_bits_per_element(
    context: int,
    sink: int = 64,
    recent: int = 256,
    bits: int = 2,
    group_size: int = 128,
    scale_bits: int = 16,
    hp_bits: int = 16,
    head_dim: int | None = None,
) -> float:
    """Average stored bits per K/V element at ``context`` tokens, windows and scale overhead included."""
    if context <= 0:
        raise InputError(f"context must be positive, got {context}")
    if sink < 0 or recent < 0:
        raise InputError("sink and recent must be >= 0")
    q = int2_len(context, sink, recent)
    return mixed_bits_per_element(context, q, int_region_bits(bits, group_size, scale_bits, head_dim), hp_bits)


def kv_cache_bytes(
    context: int,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    bits_per_element: float,
    batch: int = 1,
) -> int:
    """Bytes of K and V for ``batch`` sequences of ``context`` tokens at ``bits_per_element``."""
    elements = 2 * batch * context * num_layers * num_kv_heads * head_dim
    return int(round(elements * bits_per_element / 8))
