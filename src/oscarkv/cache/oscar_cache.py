"""``OscarCache``: a transformers ``Cache`` with BF16 sink + INT2 history + BF16 recent window."""

from __future__ import annotations

import os

import torch
from transformers.cache_utils import Cache, get_layer_types_and_kwargs

from ..methods import KVMethod, make_method
from ..validation import check_update_args, resolve_method, resolve_rotations, restore_layer, snapshot_layer
from ..rotation import RotationSet, config_fingerprint
from .layers import FullPrecisionLayer, KiviLayer, MixedWindowLayer, TokenwiseLayer
from ..errors import InputError, UnsupportedError

OUTPUT_BASES = ("original", "rotated")


def held_quantized(method: KVMethod, j, n):
    """Is token j held quantized when the cache holds n tokens? (ints or broadcasting tensors; j and n
    in a row's own positions, i.e. after its left padding). The rule of ``OscarCache``'s docstring,
    for evaluation fast paths that fake-quantize instead of running the cache."""
    j, n = torch.as_tensor(j), torch.as_tensor(n)
    if not method.quantized:
        return torch.zeros(torch.broadcast_shapes(j.shape, n.shape), dtype=torch.bool)
    s, w = method.sink, method.recent
    if method.key_axis == "channel":  # whole KIVI blocks aligned at the sink
        g = method.group_size
        return (j >= s) & (j < s + torch.clamp(n - w - s, min=0) // g * g)
    return (j >= s) & (j < n - w)


class OscarCache(Cache):
    """Mixed-precision KV cache: per layer, ``sink`` first tokens and ``recent`` last tokens in the
    model dtype, everything in between packed (INT2 / INT4 codes + scale/zero), all rows stored
    rotated by the method's R_K / R_V (identity for ``naive``/``kivi``/``bf16``).

    Exact semantics (the evaluation fast path relies on them):

    * Held state. When a layer holds n tokens after an update (the tokens just added included),
      token j is held quantized iff ``sink <= j < n - recent`` (token-wise methods: naive,
      hadamard, int4, oscar). Otherwise it is held exactly (rotated, model dtype; rotating and
      un-rotating costs float rounding only). ``bf16`` never quantizes. ``kivi``: token j is held
      quantized iff ``sink <= j < sink + G * floor((n - recent - sink) / G)`` (G = group_size), i.e.
      only whole key blocks, aligned at position ``sink``, that lie entirely outside the recent window.
    * Token-local. A token's quantized value depends only on that token's K/V row (KIVI keys: on its
      block), never on when it was demoted or on other rows of the batch.
    * Returned states. ``update(k, v)`` with T new tokens returns (old, new) concatenated along the
      token axis: the n - T previously held tokens *as held after this update's demotions*, then
      the T new tokens unquantized (transformers' convention and spec section 5.4: within one call,
      tokens attend to each other at full precision). Hence in step-by-step decoding the query at
      position i sees token j quantized iff ``sink <= j <= i - recent`` for recent >= 1; with
      ``recent == 0`` the query still sees its own token unquantized (j < i), a departure from the
      held rule that only the current token gets.
    * Basis. By default (``output_basis == "original"``) keys/values are returned in the model's
      basis, so any attention implementation works. ``enable_oscar_attention`` switches the cache to
      ``"rotated"``: returned K/V stay rotated and the registered attention function rotates q by R_K
      and the output back by R_V^T (or R_V^T is absorbed into o_proj).
    * Left padding. Call ``set_padding(attention_mask)`` before the first forward (or install
      ``oscarkv.integrations.transformers.track_padding(model)``): row b's sink is then its first
      ``sink`` *real* tokens and all the rules above apply to each row in its own positions.

    ``nbytes()`` reports the bytes actually held per segment; ``bits_per_element()`` the average
    stored bits per K/V element (windows count at the model dtype's width, e.g. 32 on CPU float32).
    """

    def __init__(
        self,
        config,
        method: str | KVMethod = "oscar",
        rotations: RotationSet | str | os.PathLike | None = None,
        sink: int | None = None,
        recent: int | None = None,
        group_size: int | None = None,
        scale_dtype: str | None = None,
        clip: str | None = None,
        levels: str | None = None,
    ):
        # Defaults (sink 64, recent 256, group 128, float16, the method's clip, uniform levels) come from
        # make_method / KVMethod. Keywords given explicitly override a KVMethod's own settings too.
        method = resolve_method(method, sink=sink, recent=recent, group_size=group_size,
                                scale_dtype=scale_dtype, clip=clip, levels=levels)
        rotations = resolve_rotations(rotations, config)
        text = config.get_text_config(decoder=True)
        layer_types, _ = get_layer_types_and_kwargs(text)
        if any(t != "full_attention" for t in layer_types):
            raise UnsupportedError(
                f"OscarCache supports full-attention layers only; this model has {sorted(set(layer_types))}"
            )
        if method.rotation == "calibrated" and rotations is None:
            raise InputError(
                f"method {method.name!r} needs calibrated rotations: pass rotations=RotationSet.load(PATH) "
                "(create them with `oscar-kv calibrate --model M --out ROT.safetensors`)"
            )
        if rotations is not None:
            rotations.check_model(text)  # RotationMismatchError names what differs
        fp = config_fingerprint(text)
        self.method, self.rotations = method, rotations
        self.head_dim, self.num_kv_heads = fp["head_dim"], fp["num_kv_heads"]
        layers = [self._make_layer(method, i, fp["head_dim"], rotations) for i in range(fp["num_layers"])]
        super().__init__(layers=layers)
        self._output_basis = "original"

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        """transformers' ``Cache.update``, all-or-nothing per layer: when the layer's update raises (e.g.
        non-finite K/V reaching the quantizer), the layer is left as it was before the call, so its
        length is not advanced and the same call can be retried or the cache used further."""
        check_update_args(key_states, value_states, layer_idx, len(self.layers), self.num_kv_heads, self.head_dim)
        layer = self.layers[layer_idx]
        snap = snapshot_layer(layer)
        try:
            return super().update(key_states, value_states, layer_idx, *args, **kwargs)
        except BaseException:
            restore_layer(layer, snap)
            raise

    @staticmethod
    def _make_layer(method: KVMethod, idx: int, head_dim: int, rotations):
        if not method.quantized:
            return FullPrecisionLayer()
        plan = method.layer_plan(idx, head_dim, rotations)
        cls = KiviLayer if plan.key_axis == "channel" else TokenwiseLayer
        return cls(plan, method.sink, method.recent)

    # ------------------------------------------------------------------ modes
    @property
    def output_basis(self) -> str:
        """"original" (default, any attention) or "rotated" (OSCAR attention function)."""
        return self._output_basis

    def set_output_basis(self, basis: str) -> None:
        if basis not in OUTPUT_BASES:
            raise InputError(f"output basis must be one of {OUTPUT_BASES}, got {basis!r}")
        # storage does not depend on the basis, so switching between forwards is safe
        self._output_basis = basis
        for layer in self.layers:
            layer.rotated_outputs = basis == "rotated"

    def set_padding(self, attention_mask: torch.Tensor) -> None:
        """Tell the cache each row's left padding from a 2-D 0/1 mask [B, T] (T >= prompt length).

        Must come before the first update (an empty cache); later calls with the same padding are
        no-ops, so a hook may call it on every forward. Only left padding is supported.
        """
        m = attention_mask
        if m is None:
            return
        if m.ndim != 2:
            raise InputError(f"set_padding needs a 2-D [batch, seq] attention mask, got shape {tuple(m.shape)}")
        m = m.to(torch.bool)
        # left padding <=> each row is 0...0 1...1 (non-decreasing)
        if (m[:, 1:].int() < m[:, :-1].int()).any():
            raise InputError("OscarCache supports left padding only (each mask row must be 0...0 1...1)")
        pad = (~m).sum(dim=1).long()
        if self.get_seq_length() > 0:
            cur = getattr(self.layers[0], "pad", None)
            cur = torch.zeros_like(pad) if cur is None else cur.to(pad.device)
            if cur.shape != pad.shape or not torch.equal(cur, pad):
                raise InputError("set_padding called on a non-empty cache with different padding; call reset() first")
            return
        if self.method.key_axis == "channel" and pad.numel() and int(pad.max()) != int(pad.min()):
            raise UnsupportedError("kivi does not support rows with different left padding")
        for layer in self.layers:
            if isinstance(layer, MixedWindowLayer):
                layer.pad = pad.clone()

    # ------------------------------------------------------------------ accounting
    def segments(self, layer_idx: int = 0) -> dict:
        """Token counts of one layer: sink, quantized, residual (KIVI), recent, total."""
        return self.layers[layer_idx].segments()

    def nbytes(self, allocated: bool = False) -> dict:
        """Bytes held, summed over layers: sink, quantized (codes + scale/zero), window (tail), total.
        ``allocated=True`` counts the history buffers' spare capacity too."""
        out = {"sink": 0, "quantized": 0, "window": 0}
        for layer in self.layers:
            for k, v in layer.nbytes(allocated).items():
                out[k] += v
        out["total"] = sum(out.values())
        return out

    def bits_per_element(self) -> float:
        """Average stored bits per K or V element (codes, scale/zero and windows included)."""
        elements = 0
        for layer in self.layers:
            if layer.is_initialized:
                elements += 2 * layer.batch_size * self.num_kv_heads * self.head_dim * layer.get_seq_length()
        return 8.0 * self.nbytes()["total"] / elements if elements else 0.0

    def __repr__(self) -> str:
        m = self.method
        return (
            f"OscarCache(method={m.name!r}, sink={m.sink}, recent={m.recent}, group_size={m.group_size}, "
            f"layers={len(self.layers)}, basis={self._output_basis!r}, tokens={self.get_seq_length()})"
        )
