"""KIVI-2 keys: quantized per *channel* over blocks of ``group_size`` tokens (torch reference).

A block of G consecutive tokens of one KV head is a [G, d] tile; each of its d channels is one row of
G values with its own scale and zero (the token-wise format of ``format.py`` applied along tokens).
Values stay token-wise. Tokens of an incomplete block are not quantized (KIVI's residual).
"""

from __future__ import annotations

import torch

from ..errors import InputError
from .format import QuantConfig, QuantizedRows, dequantize, quantize


def quantize_key_blocks(k: torch.Tensor, cfg: QuantConfig) -> QuantizedRows:
    """k ``[B, H, T, d]`` with T a multiple of cfg.group_size, quantized per channel over each block of
    group_size tokens (never clipped). Returns packed rows ``[B, H, T/G, d, G]`` (one row per channel)."""
    b, h, t, d = k.shape
    g = cfg.group_size
    if t % g:
        raise InputError(f"KIVI key blocks need a multiple of {g} tokens, got {t}")
    blocks = k.float().reshape(b, h, t // g, g, d).transpose(-1, -2)  # [B, H, nb, d, G]
    return quantize(blocks, QuantConfig(cfg.bits, g, None, cfg.scale_dtype))


def dequantize_key_blocks(q: QuantizedRows, dtype=torch.float32) -> torch.Tensor:
    """Inverse of ``quantize_key_blocks``: ``[B, H, T, d]`` in ``dtype``."""
    x = dequantize(q)  # [B, H, nb, d, G]
    b, h, nb, d, g = x.shape
    return x.transpose(-1, -2).reshape(b, h, nb * g, d).to(dtype)


def fake_quantize_key_blocks(k: torch.Tensor, cfg: QuantConfig, start: int) -> torch.Tensor:
    """k ``[B, H, T, d]`` with every whole block of ``cfg.group_size`` tokens from ``start`` on (blocks
    aligned at ``start``, the end of the sink) quantized -> dequantized; the other tokens unchanged."""
    g = cfg.group_size
    nb = max(0, k.shape[2] - start) // g
    kq = k.clone()
    if nb:
        end = start + nb * g
        kq[:, :, start:end] = dequantize_key_blocks(quantize_key_blocks(k[:, :, start:end], cfg), k.dtype)
    return kq
