"""``OscarCache``: a transformers ``Cache`` with BF16 sink + INT2 history + BF16 recent window."""

from __future__ import annotations

import os

import torch
from transformers.cache_utils import Cache, get_layer_types_and_kwargs

from ..errors import InputError, StateError, UnsupportedError
from ..methods import KVMethod
from ..validation import check_update_args, resolve_method, resolve_rotations, restore_layer, snapshot_layer
from ..rotation import RotationSet, config_fingerprint
from .layers import FullPrecisionLayer, KiviLayer, MixedWindowLayer, TokenwiseLayer
from .paged import PagedLayer, PagedState, paged_support

BACKENDS = ("auto", "reference", "paged")

OUTPUT_BASES = ("original", "rotated")


class OscarCache(Cache):
    """Mixed-precision KV cache: per layer, ``sink`` first tokens and ``recent`` last tokens in the
    model dtype, everything in between packed (INT2 / INT4 codes + scale/zero), all rows stored
    rotated by the method's R_K / R_V (identity for ``naive``/``kivi``/``bf16``).

    Exact semantics (the evaluation fast path relies on them):

    * Held state. When a layer holds n tokens after an update (the tokens just added included),
      token j is held quantized iff ``method.held_quantized(j, n)``, i.e.
      ``sink <= j < sink + B * floor(max(0, n - sink - recent) / B)`` with B the demotion page
      (``page``, default 16; KIVI: its key block ``group_size``). Otherwise it is held exactly
      (rotated, model dtype; rotating and un-rotating costs float rounding only). ``bf16`` never
      quantizes. ``page=1`` demotes every token as soon as it leaves the recent window.
    * Token-local. A token's quantized value depends only on that token's K/V row (KIVI keys: on its
      block), never on when it was demoted or on other rows of the batch.
    * Returned states. ``update(k, v)`` with T new tokens returns (old, new) concatenated along the
      token axis: the n - T previously held tokens *as held after this update's demotions*, then
      the T new tokens unquantized (transformers' convention and spec section 5.4: within one call,
      tokens attend to each other at full precision). Hence in step-by-step decoding the query at
      position i sees token j quantized iff ``held_quantized(j, i + 1) and j < i``: with
      ``recent == 0, page == 1`` the query still sees its own token unquantized, a departure from
      the held rule that only the current token gets.
    * Basis. By default (``output_basis == "original"``) keys/values are returned in the model's
      basis, so any attention implementation works. ``enable_oscar_attention`` switches the cache to
      ``"rotated"``: returned K/V stay rotated and the registered attention function rotates q by R_K
      and the output back by R_V^T (or R_V^T is absorbed into o_proj).
    * Left padding. The attention mask of the first forward tells the cache each row's padding
      (``set_padding``; oscar-kv's hook and attention function call it, see
      ``oscarkv.integrations.transformers``): row b's sink is then its first ``sink`` *real* tokens
      and all the rules above apply to each row in its own positions.

    * Backends. ``backend="reference"`` keeps the layers above (any device, any attention).
      ``backend="paged"`` stores K/V in the paged INT2 pools of ``oscarkv.kernels`` and attends with
      the kernels (``oscarkv.cache.paged``; needs ``enable_oscar_attention``). ``"auto"`` (default)
      picks "paged" when ``enable_oscar_attention`` is called with a CUDA model and the method is one
      the kernels run (token-wise INT2, windows multiples of 16), else "reference". ``max_tokens``:
      the paged pools' capacity per row (default: prompt + 4096), ``kernel_backend``: "auto" (the
      CUDA kernels on tile16 pools when they build, else Triton on CUDA; the torch reference on CPU),
      "cuda", "triton" or "torch". The paged pool demotes in the kernels' page (B = block_size = 16);
      the cache's method takes that page when it switches.

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
        page: int | None = None,
        backend: str = "auto",
        max_tokens: int | None = None,
        kernel_backend: str = "auto",
    ):
        if not callable(getattr(config, "get_text_config", None)):
            raise InputError(f"OscarCache needs the model's transformers config (model.config), got {type(config).__name__}")
        if backend not in BACKENDS:
            raise InputError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
            raise InputError(f"max_tokens must be a positive int, got {max_tokens!r}")
        from ..kernels import KERNEL_BACKENDS

        if kernel_backend not in KERNEL_BACKENDS:  # before: refused by the first write_kv, inside a forward
            raise InputError(f"kernel_backend must be one of {KERNEL_BACKENDS}, got {kernel_backend!r}")
        if backend == "reference":  # settings of the paged pools, silently ignored before
            for name, v, off in (("max_tokens", max_tokens, None), ("kernel_backend", kernel_backend, "auto")):
                if v != off:
                    raise InputError(f"{name}={v!r} sets the paged backend, but backend='reference' was asked for; "
                                     f"drop {name} or use backend='paged' / 'auto'")
        # Defaults (sink 64, recent 256, group 128, float16, the method's clip, uniform levels, page 16) come
        # from make_method / KVMethod. Keywords given explicitly override a KVMethod's own settings too
        # (issue 11: OscarCache(cfg, KVMethod(...), sink=0) ignored sink); rotations may be a file path.
        method = resolve_method(method, sink=sink, recent=recent, group_size=group_size,
                                scale_dtype=scale_dtype, clip=clip, levels=levels, page=page)
        if method.query != "exact" and backend != "reference":
            raise InputError(f"method {method.name!r}: +q8 (the CUDA kernel's int8 query on the INT2 history) runs on "
                             "backend='reference' only, to reproduce the GPU path's rounding; the paged backend takes "
                             "the method without it (on CUDA its kernels score the INT2 history with an int8 query "
                             "anyway)")
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
        self.backend, self.max_tokens, self.kernel_backend = backend, max_tokens, kernel_backend
        self.paged: PagedState | None = None
        if backend == "paged":
            self.use_paged()
            if page is not None and page != self.method.page:  # asked for explicitly: not silently replaced
                raise InputError(f"page={page}: the paged backend demotes in pages of {self.method.page} tokens "
                                 "(the kernels' block); drop page= or use backend='reference'")
        # Left padding of the batch, from an attention mask: None = not known yet. A batch of more than
        # one row is refused while it is unknown (a padded row would silently see other tokens).
        self._padding_known = False

    @staticmethod
    def _make_layer(method: KVMethod, idx: int, head_dim: int, rotations):
        if not method.quantized:
            return FullPrecisionLayer()
        plan = method.layer_plan(idx, head_dim, rotations)
        cls = KiviLayer if plan.per_channel_keys else TokenwiseLayer
        return cls(plan, method)

    # ------------------------------------------------------------------ backends
    def paged_unsupported(self) -> str | None:
        """None if the paged backend can hold this cache's method; else why not (one line)."""
        return paged_support(self.method, self.head_dim)

    def use_paged(self) -> None:
        """Switch an empty cache to the paged backend (``enable_oscar_attention`` does it on CUDA)."""
        if self.paged is not None:
            return
        why = self.paged_unsupported()
        if why:
            raise InputError(f"the paged OscarCache cannot run this method: {why}")
        if self.get_seq_length() > 0:
            raise StateError("the cache already holds tokens; switch backends on an empty cache")
        from dataclasses import replace

        from .paged import BLOCK_SIZE

        # the pools demote whole blocks (MixedKVCache's default page): the cache's window rule follows it
        page = BLOCK_SIZE
        if page != self.method.page:
            self.method = replace(self.method, page=page)
        plans = [layer.plan for layer in self.layers]
        self.paged = PagedState(self.method, plans, self.num_kv_heads, self.head_dim, self.max_tokens, self.kernel_backend)
        self.layers = [PagedLayer(self.paged, i, p) for i, p in enumerate(plans)]
        self._output_basis = "rotated"
        self.backend = "paged"

    # ------------------------------------------------------------------ modes
    @property
    def output_basis(self) -> str:
        """"original" (default, any attention) or "rotated" (OSCAR attention function)."""
        return self._output_basis

    def set_output_basis(self, basis: str) -> None:
        if basis not in OUTPUT_BASES:
            raise InputError(f"output basis must be one of {OUTPUT_BASES}, got {basis!r}")
        if self.paged is not None:
            if basis != "rotated":
                return  # the paged backend works in the rotated basis only (its attention is oscar-kv's)
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
        if m is None:  # no mask: the model attends to every token, so no padding
            if self.get_seq_length() == 0:
                if self.paged is not None:
                    self.paged.pad = None
                for layer in self.layers:
                    if isinstance(layer, MixedWindowLayer):
                        layer.pad = None
                self._padding_known = True
            return
        if m.ndim != 2:
            raise InputError(f"set_padding needs a 2-D [batch, seq] attention mask, got shape {tuple(m.shape)}")
        m = m.to(torch.bool)
        # left padding <=> each row is 0...0 1...1 (non-decreasing)
        if (m[:, 1:].int() < m[:, :-1].int()).any():
            raise InputError("OscarCache supports left padding only (each mask row must be 0...0 1...1)")
        pad = (~m).sum(dim=1).long()
        if self.get_seq_length() > 0:
            cur = self.paged.pad if self.paged is not None else getattr(self.layers[0], "pad", None)
            cur = torch.zeros_like(pad) if cur is None else cur.to(pad.device)
            if cur.shape != pad.shape or not torch.equal(cur, pad):
                raise InputError("set_padding called on a non-empty cache with different padding; call reset() first")
            return
        if self.method.per_channel_keys and pad.numel() and int(pad.max()) != int(pad.min()):
            raise UnsupportedError("kivi does not support rows with different left padding")
        if self.paged is not None:
            self.paged.pad = pad.cpu()
        for layer in self.layers:
            if isinstance(layer, MixedWindowLayer):
                layer.pad = pad.clone()
        self._padding_known = True

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        """transformers' ``Cache.update``. Shapes are checked first (Python ints, no device sync). On the
        reference backend a layer update that raises (e.g. non-finite K/V reaching the quantizer) leaves
        the layer as it was, so its length is not advanced and the cache stays usable (issue 11)."""
        held = self.layers[layer_idx] if 0 <= layer_idx < len(self.layers) else None
        check_update_args(key_states, value_states, layer_idx, len(self.layers), self.num_kv_heads, self.head_dim,
                          getattr(held, "batch_size", None) if held is not None and held.is_initialized else None)
        if (not self._padding_known and self.method.quantized and key_states.shape[0] > 1
                and self.get_seq_length(layer_idx) == 0):
            # Issue 11 item 2: never a silently different answer for left-padded rows.
            raise StateError(
                f"OscarCache got a batch of {key_states.shape[0]} rows but no attention mask to find their left padding: "
                "call oscarkv.integrations.transformers.track_padding(model) (or enable_oscar_attention) once, "
                "or cache.set_padding(attention_mask) before the first forward"
            )
        if layer_idx > 0 and getattr(self.layers[layer_idx - 1], "fresh", False):
            self._plain_attention_on_rotated(layer_idx - 1)
        if self.paged is not None:
            return super().update(key_states, value_states, layer_idx, *args, **kwargs)
        layer = self.layers[layer_idx]
        snap = snapshot_layer(layer)
        try:
            out = super().update(key_states, value_states, layer_idx, *args, **kwargs)
        except BaseException:
            restore_layer(layer, snap)
            raise
        self._last_update = (layer_idx, snap)
        return out

    def _plain_attention_on_rotated(self, idx: int) -> None:
        """Layer ``idx`` returned rotated K/V (``enable_oscar_attention``) and the attention that followed did
        not take them (the OSCAR attention function clears ``fresh``): a model that is not enabled with this
        cache attended rotated keys with unrotated queries (before: silently wrong logits on the reference
        backend). Refused at the next layer's update; on the reference backend layer ``idx`` is put back as it
        was, so the cache is unchanged (the paged backend marks itself inconsistent, as for any broken forward)."""
        last = getattr(self, "_last_update", None)
        if self.paged is None and last is not None and last[0] == idx:
            restore_layer(self.layers[idx], last[1])
            self._last_update = None
        raise StateError("this OscarCache returns rotated keys/values (enable_oscar_attention), but the model running "
                         "this forward does not use the OSCAR attention: call enable_oscar_attention(model, cache) for "
                         "the model you run, or disable_oscar_attention on the enabled one")

    def reset(self) -> None:
        super().reset()
        self._padding_known = False

    # ------------------------------------------------------------------ accounting
    def segments(self, layer_idx: int = 0) -> dict:
        """Token counts of one layer: sink, quantized, residual (KIVI), recent, total (paged: of row 0)."""
        if self.paged is not None:
            n = self.paged.mgr.length(0) if self.paged.mgr is not None else 0
            s, q = min(n, self.method.sink), self.method.int2_len(n)
            return {"sink": s, "quantized": q, "residual": 0, "recent": n - s - q, "total": n}
        return self.layers[layer_idx].segments()

    def nbytes(self, allocated: bool = False) -> dict:
        """Bytes held, summed over layers: sink, quantized (codes + scale/zero), window (tail), total.
        ``allocated=True`` counts the history buffers' spare capacity too."""
        out = {"sink": 0, "quantized": 0, "window": 0}
        if self.paged is not None:  # pools are preallocated: report what is allocated
            out["allocated_pools"] = self.paged.nbytes() if self.paged.mgr is not None else 0
            out["total"] = out["allocated_pools"]
            return out
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
            f"OscarCache(method={m.name!r}, sink={m.sink}, recent={m.recent}, page={m.page}, group_size={m.group_size}, "
            f"layers={len(self.layers)}, basis={self._output_basis!r}, tokens={self.get_seq_length()})"
        )
