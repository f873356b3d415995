"""Attention dimensions of a transformers decoder, read from its config in one place.

Every part of the package that needs layer/head counts or head_dim (rotation files, calibration, the
caches, evaluation) reads them through ``attention_dims`` so a config without ``head_dim`` or without
``num_key_value_heads`` (MHA) means the same thing everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError


@dataclass(frozen=True)
class AttentionDims:
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def group(self) -> int:
        """Query heads per KV head (GQA group size)."""
        return self.num_heads // self.num_kv_heads


def text_config(model_or_config):
    """The decoder's config: ``get_text_config()`` of a model's config (or of a config itself)."""
    cfg = getattr(model_or_config, "config", model_or_config)
    return getattr(cfg, "get_text_config", lambda: cfg)()


def attention_dims(model_or_config, power_of_two: bool = False) -> AttentionDims:
    """Layer and head counts and head_dim of a model or config (head_dim defaults to hidden / heads, KV
    heads to the query heads). ``power_of_two``: also require the head_dim OSCAR's Hadamard rotations need."""
    cfg = text_config(model_or_config)
    try:
        n_layers, n_heads = int(cfg.num_hidden_layers), int(cfg.num_attention_heads)
    except AttributeError:
        raise InputError(
            f"{type(model_or_config).__name__} has no num_hidden_layers/num_attention_heads in its config; "
            "oscar-kv supports decoder-only transformers models (Llama, Qwen2, Qwen3, ...)"
        ) from None
    n_kv = int(getattr(cfg, "num_key_value_heads", None) or n_heads)
    d = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads)
    if n_heads % n_kv:
        raise InputError(f"{n_heads} query heads are not a multiple of {n_kv} KV heads")
    if power_of_two and (d <= 0 or d & (d - 1)):
        raise InputError(
            f"head_dim {d} is not a power of two; OSCAR's Hadamard-based rotations need a power-of-two "
            "head_dim (e.g. 32, 64, 128, 256)"
        )
    return AttentionDims(n_layers, n_heads, n_kv, d)
