"""The KV-cache methods we compare: a name -> definition table (``METHODS``), ``make_method`` to get
one with shared window/group settings, and what a method does to a layer's K and V (``LayerPlan``).

    bf16      unquantized (stored in the model's dtype: float32 on CPU, bf16 on GPU)
    naive     token-wise INT2 per group, no rotation, no clipping
    hadamard  QuaRot-style: data-free Hadamard H_d per layer, token-wise INT2, no clipping
    kivi      KIVI-2: keys per *channel* over blocks of `group_size` tokens, values per token;
              a full-precision residual holds the tokens of the incomplete block
    int4      Saw-INT4-style reference row: Hadamard + token-wise INT4 (full H_d rather than the
              block-diagonal Hadamard of SAW-INT4: same cost at head_dim <= 128, no worse accuracy)
    oscar     calibrated R = U.H.P_br per layer (K and V), clip ratios from the rotation file (the paper)
    oscar-plus  the best measured recipe beyond the paper (issue 10, docs/ACCURACY.md section 5): the
              paper's calibrated U.H.P_br with fitted clip, one per KV head, on exactly centered K and V
              (calibrated means); needs a file from `oscar-kv calibrate --plus`. Lloyd-Max levels, the
              exact key rescale and the attention-weighted key fit (`--levels lloyd-max`, `--key-scale`,
              `--key-weighting attention`) did not help on BOTH measured models, so they are options,
              not part of it. A name may carry "+keyscale" / "+nokeyscale" to insist on a file with /
              without the key rescale.
Centering (rotation/centering.py, exact and free at run time) is used by: oscar-plus (always), hadamard
and int4 (whenever the rotation file passed has calibrated means: "auto"), never by naive, kivi (its
per-channel key groups already absorb channel offsets) or oscar (kept faithful to the paper). A name
may carry "+center" / "+nocenter" (e.g. ``oscar+center``, ``hadamard+nocenter``) for ablations.

All methods share the same BF16 windows (``sink`` first tokens, ``recent`` last tokens) so a table
compares quantizers at equal bits; ``sink=recent=0, page=1`` gives pure INT2.

The window rule (TEAM decision 1) has ONE definition, ``quant.int2_len``, which ``KVMethod.int2_len`` /
``KVMethod.held_quantized`` apply with the method's windows (as the paged pools and the vLLM plan do with theirs):
a sequence of t tokens holds tokens [S, S + int2_len(t)) quantized with
int2_len(t) = B * floor(max(0, t - S - W) / B), B = the demotion page (``page``, default 16 like the
GPU pool's block size; KIVI: its key block ``group_size``). The sink [0, min(t, S)) and the recent
tokens [S + int2_len, t) (W .. W + B - 1 of them) stay in high precision. The CPU cache
(cache/layers.py), the banded evaluation (eval/banded.py) and the GPU cache all derive from it.

Fields are typed (``Literal``) and checked when a ``KVMethod`` is built, so a misspelt
``rotation="hadamrd"`` is refused instead of silently taking another branch. KIVI's difference (keys
per channel over token blocks, ``key_axis="channel"``) is asked through ``per_channel_keys`` and
handled in ``KVMethod.demotion_unit``, ``KVMethod.layer_plan`` and ``LayerPlan``'s K operations.

The operations themselves live in their own modules: quantization in ``quant/`` (KIVI blocks in ``quant/kivi.py``),
rotations in ``rotation/apply.py``, centering in ``rotation/centering.py``, clip defaults in
``calibrate/clip.py``.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass, fields, replace
from typing import Literal

import torch

from .calibrate.clip import DEFAULT_CLIP_K, DEFAULT_CLIP_V
from .errors import InputError
from .quant import (
    QuantConfig,
    QuantizedRows,
    dequantize,
    dequantize_key_blocks,
    fake_quantize,
    fake_quantize_key_blocks,
    int2_len,
    int_region_bits,
    kv_cache_bytes,
    mixed_bits_per_element,
    quantize,
    quantize_key_blocks,
)
from .rotation import RotationSet, hadamard, rotate, unrotate
from .rotation.centering import center, uncenter

Bits = Literal[2, 4]
Rotation = Literal["none", "hadamard", "calibrated"]
KeyAxis = Literal["token", "channel"]  # channel: KIVI keys
ClipMode = Literal["fitted", "default", "off"]  # fitted: from the rotation file; default: 0.96 / 0.92
Levels = Literal["uniform", "lloyd-max"]  # lloyd-max: levels from the rotation file
CenterMode = Literal["off", "on", "auto"]  # auto: centered iff the rotation file has calibrated means
KeyScale = Literal["any", "on", "off"]  # on / off: require a file with / without the key rescale
QueryMode = Literal["exact", "int8"]  # int8: scores of the INT2 history with q rounded as the CUDA kernel does
ScaleDtype = Literal["float16", "bfloat16", "float32", "log8"]  # log8: quant/format.py (one byte each)

CLIP_MODES = typing.get_args(ClipMode)
CENTER_MODES = typing.get_args(CenterMode)
LEVEL_MODES = typing.get_args(Levels)


@dataclass(frozen=True)
class KVMethod:
    """One KV method: quantizer settings and the BF16 windows (see the module docstring)."""

    name: str
    bits: Bits | None = 2  # None: unquantized
    rotation: Rotation = "none"
    key_axis: KeyAxis = "token"
    group_size: int = 128
    sink: int = 64
    recent: int = 256
    clip: ClipMode = "off"
    scale_dtype: ScaleDtype = "float16"
    levels: Levels = "uniform"
    center: CenterMode = "off"  # subtract the calibrated mu_K / mu_V (rotation/centering.py)
    key_scale: KeyScale = "any"  # a label check on the rotation file (oscar-plus ablation rows)
    page: int = 16  # demotion page B of the window rule (1 = demote every token as it leaves the window)
    # "int8" (suffix "+q8"): evaluation ablation of the CUDA decode kernel's precision: the quantized history is
    # scored with q rounded to int8 per head (kernels/reference.int8_query); eval/banded.py only
    query: QueryMode = "exact"

    def __post_init__(self):
        _check_fields(self)

    @property
    def quantized(self) -> bool:
        return self.bits is not None

    @property
    def per_channel_keys(self) -> bool:
        """KIVI: keys quantized per channel over blocks of ``group_size`` tokens (values per token)."""
        return self.key_axis == "channel"

    # --------------------------------------------------------------- the window rule
    @property
    def demotion_unit(self) -> int:
        """Tokens demoted together: the page B, or for KIVI its whole key block (``page`` is unused there)."""
        return self.group_size if self.per_channel_keys else self.page

    def int2_len(self, t):
        """How many tokens a sequence of ``t`` tokens holds quantized, as the tokens [sink, sink + int2_len(t)):
        the window rule (``quant.int2_len``) with this method's windows and demotion unit. ``t`` is an int or
        an integer tensor (then elementwise)."""
        if not self.quantized:
            return torch.zeros_like(t) if torch.is_tensor(t) else 0
        return int2_len(t, self.sink, self.recent, self.demotion_unit)

    def held_quantized(self, j, t) -> torch.Tensor:
        """Bool (broadcast of j and t): is token j held quantized when the sequence holds t tokens?
        j and t count a row's own tokens (after its left padding)."""
        j, t = torch.as_tensor(j), torch.as_tensor(t)
        return (j >= self.sink) & (j < self.sink + self.int2_len(t))

    def with_windows(self, sink: int, recent: int, page: int | None = None) -> "KVMethod":
        return replace(self, sink=sink, recent=recent, page=self.page if page is None else page)

    def at_bits(self, bits: float, context: int, head_dim: int, sink: int = 4) -> "KVMethod":
        """This method with the largest BF16 window (``sink`` tokens, the rest recent; page 1) whose bits per
        element at ``context`` stay <= ``bits``: how a pure-INT2 table compares a token-wise method with
        KIVI at KIVI's real bits (KIVI's incomplete key block stays in full precision and is counted)."""
        if isinstance(bits, bool) or not isinstance(bits, (int, float)) or not 0 < bits < float("inf"):
            raise InputError(f"at_bits: bits must be a finite number > 0 (bits per K/V element), got {bits!r}")
        base = self.with_windows(0, 0, 1)
        if base.bits_per_element(context, head_dim) > bits:
            raise InputError(f"{self.name} needs {base.bits_per_element(context, head_dim):.3f} bits per element "
                             f"without any window, more than the {bits:.3f} asked for")
        n = 0
        while n < context and base.with_windows(min(sink, n + 1), n + 1 - min(sink, n + 1)).bits_per_element(
                context, head_dim) <= bits:
            n += 1
        return replace(base.with_windows(min(sink, n), n - min(sink, n)), name=f"{self.name}@{bits:.2f}b")

    # --------------------------------------------------------------- accounting
    def scale_bits(self) -> int:
        return 8 if self.scale_dtype == "log8" else torch.finfo(getattr(torch, self.scale_dtype)).bits

    def quantized_tokens(self, context: int) -> int:
        """Tokens held quantized when the cache holds exactly ``context`` tokens."""
        return self.int2_len(context)

    def mean_quantized_tokens(self, context: int) -> float:
        """Like ``quantized_tokens`` but averaged over decode steps: the incomplete demotion page (KIVI:
        key block) of 0 .. B-1 tokens stays in full precision, (B - 1) / 2 on average. At a multiple of
        B the exact count would show no partial page at all, which flatters the bits."""
        if self.quantized and self.demotion_unit > 1:
            return max(0.0, context - self.sink - self.recent - (self.demotion_unit - 1) / 2)
        return float(self.quantized_tokens(context))

    def bits_per_element(self, context: int, head_dim: int) -> float:
        for name, v in (("context", context), ("head_dim", head_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"{name} must be an integer >= 1, got {v!r}")
        if not self.quantized:
            return 16.0
        int_bits = int_region_bits(self.bits, self.group_size, self.scale_bits(), head_dim)
        return mixed_bits_per_element(context, self.mean_quantized_tokens(context), int_bits)

    def kv_bytes(self, context: int, num_layers: int, num_kv_heads: int, head_dim: int, batch: int = 1) -> int:
        return kv_cache_bytes(context, num_layers, num_kv_heads, head_dim, self.bits_per_element(context, head_dim), batch)

    # --------------------------------------------------------------- per layer
    def layer_plan(self, layer: int, head_dim: int, rotations: RotationSet | None = None) -> "LayerPlan":
        if not self.quantized:
            return LayerPlan(None, None, None, None, self.key_axis)
        if self.center == "on" and (rotations is None or rotations.k_mean is None):
            raise InputError(
                f"method {self.name!r} centers K/V and needs a rotation file with calibrated means "
                "(format 2); create it with `oscar-kv calibrate --plus` and pass --rotations ROT"
            )
        if self.rotation == "calibrated" and rotations is None:
            raise InputError(
                f"method {self.name!r} needs calibrated rotations; create them with "
                "`oscar-kv calibrate --model M --data FILE --out ROT.safetensors` and pass --rotations ROT"
            )
        g = min(self.group_size, head_dim)
        if not self.per_channel_keys and head_dim % g:
            raise InputError(f"group_size {self.group_size} does not divide head_dim {head_dim}")
        k_clip = v_clip = None
        if self.clip == "default":
            k_clip, v_clip = DEFAULT_CLIP_K, DEFAULT_CLIP_V
        elif self.clip == "fitted":
            if rotations is None or rotations.k_clip is None:
                k_clip, v_clip = DEFAULT_CLIP_K, DEFAULT_CLIP_V  # the spec's fallback
            else:
                k_clip, v_clip = rotations.clip("k", layer), rotations.clip("v", layer)
        k_lv = v_lv = None
        if self.levels == "lloyd-max":
            if rotations is None or rotations.k_levels is None:
                raise InputError(
                    "levels='lloyd-max' needs a rotation file with fitted levels; "
                    "calibrate with `oscar-kv calibrate --levels lloyd-max`"
                )
            k_lv, v_lv = rotations.levels("k", layer), rotations.levels("v", layer)
        k_top = v_top = None
        if self.scale_dtype == "log8":  # the per-layer T of the format, calibrated (rotation files' k/v_scale_top)
            if self.per_channel_keys:
                raise InputError(f"method {self.name!r} quantizes keys per channel; scale_dtype='log8' is for the "
                                 "token-wise methods (naive, hadamard, int4, oscar, oscar-plus)")
            if rotations is None or rotations.k_scale_top is None:
                raise InputError(f"method {self.name!r} with scale_dtype='log8' needs a rotation file with the "
                                 "log8 scale tops; calibrate one with `oscar-kv calibrate` (files before the forty-"
                                 "eighth session lack them) and pass --rotations ROT")
            k_top, v_top = rotations.scale_top("k", layer), rotations.scale_top("v", layer)
        k_cfg = QuantConfig(self.bits, g, k_clip, self.scale_dtype, k_lv, k_top)
        v_cfg = QuantConfig(self.bits, g, v_clip, self.scale_dtype, v_lv, v_top)
        if self.per_channel_keys:  # KIVI: groups run along tokens, clip never applies
            k_cfg = QuantConfig(self.bits, self.group_size, None, self.scale_dtype)
        if self.rotation == "none":
            rk = rv = None
        elif self.rotation == "hadamard":
            rk = rv = hadamard(head_dim, torch.float32)[None]
        else:
            rk, rv = rotations.rotation("k", layer), rotations.rotation("v", layer)
        kq = rotations.query_rotation(layer) if self.rotation == "calibrated" else None
        if self.key_scale != "any" and (kq is not None) != (self.key_scale == "on"):
            raise InputError(
                f"method {self.name!r} expects a rotation file {'with' if self.key_scale == 'on' else 'without'} the "
                "key rescale; calibrate it with `oscar-kv calibrate --plus` "
                f"{'--key-scale' if self.key_scale == 'on' else '--no-key-scale'}"
            )
        k_mean = v_mean = None
        if self.center != "off" and rotations is not None and rotations.k_mean is not None:
            k_mean, v_mean = rotations.mean("k", layer), rotations.mean("v", layer)
        return LayerPlan(k_cfg, v_cfg, rk, rv, self.key_axis, k_mean, v_mean, kq)


@dataclass
class LayerPlan:
    """What to do with one layer's K and V. Rotations are [R, d, d] (R = 1 or num_kv_heads) or None.

    The cache stores K as ``center(k, k_mean) @ k_rot`` and V likewise; ``quantize_k`` / ``quantize_v``
    take rows in that stored basis, ``fake_quant_kv`` rows in the model's basis."""

    k_cfg: QuantConfig | None
    v_cfg: QuantConfig | None
    k_rot: torch.Tensor | None
    v_rot: torch.Tensor | None
    key_axis: KeyAxis = "token"
    k_mean: torch.Tensor | None = None  # [H_kv or 1, d]: keys stored as (k - k_mean) @ k_rot
    v_mean: torch.Tensor | None = None  # values stored as (v - v_mean) @ v_rot; output + v_mean
    k_qrot: torch.Tensor | None = None  # queries' transform M^-T when k_rot = M is not orthogonal

    @property
    def k_query_rot(self) -> torch.Tensor | None:
        """What queries are multiplied by (and stored keys read back through: x @ Q^T = x @ M^-1)."""
        return self.k_rot if self.k_qrot is None else self.k_qrot

    @property
    def centered(self) -> bool:
        return self.k_mean is not None

    @property
    def per_channel_keys(self) -> bool:
        """KIVI: keys quantized per channel over blocks of ``k_cfg.group_size`` tokens."""
        return self.key_axis == "channel"

    # ---------------------------------------------------------- stored (rotated, centered) rows
    def quantize_k(self, kr: torch.Tensor) -> QuantizedRows:
        """Stored-basis keys ``[B, H, T, d]`` -> packed rows (KIVI: T a multiple of the block, rows per channel)."""
        return quantize_key_blocks(kr, self.k_cfg) if self.per_channel_keys else quantize(kr, self.k_cfg)

    def dequantize_k(self, q: QuantizedRows, dtype=torch.float32) -> torch.Tensor:
        return dequantize_key_blocks(q, dtype) if self.per_channel_keys else dequantize(q, self.k_cfg, dtype)

    def quantize_v(self, vr: torch.Tensor) -> QuantizedRows:
        return quantize(vr, self.v_cfg)

    def dequantize_v(self, q: QuantizedRows, dtype=torch.float32) -> torch.Tensor:
        return dequantize(q, self.v_cfg, dtype)

    # ---------------------------------------------------------- model-basis rows
    def fake_quant_kv(self, k: torch.Tensor, v: torch.Tensor, sink: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Every token's K, V ``[B, H, T, d]`` as it reads back once quantized, in the model's basis
        (KIVI keys: whole blocks aligned at ``sink``; the tokens before and after them unchanged)."""
        vq = fake_quant_rows(v, self.v_cfg, self.v_rot, mean=self.v_mean)
        if self.per_channel_keys:
            return fake_quantize_key_blocks(k, self.k_cfg, sink), vq
        return fake_quant_rows(k, self.k_cfg, self.k_rot, mean=self.k_mean, r_query=self.k_qrot), vq


def fake_quant_rows(x: torch.Tensor, cfg: QuantConfig, r: torch.Tensor | None, rotated_out: bool = False,
                    mean: torch.Tensor | None = None, r_query: torch.Tensor | None = None) -> torch.Tensor:
    """Token-wise rows x ``[B, H, T, d]``: center, rotate, quantize -> dequantize; back in the original
    basis (mean added back) unless ``rotated_out`` (then the rows stay rotated *and* centered, as the
    cache stores them). ``r_query``: M^-T when the transform r = M is not orthogonal (reading back is
    x @ M^-1 = x @ r_query^T)."""
    xh = fake_quantize(rotate(center(x.float(), mean), r), cfg)
    return (xh if rotated_out else uncenter(unrotate(xh, r if r_query is None else r_query), mean)).to(x.dtype)


# ------------------------------------------------------------------- field checks
def _allowed(hint) -> tuple | None:
    """The values a ``Literal`` (or ``Literal | None``) annotation allows; None for other types."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    args = typing.get_args(hint)
    if args and any(typing.get_origin(a) is Literal for a in args):
        return tuple(v for a in args for v in (typing.get_args(a) if typing.get_origin(a) is Literal else (None,)))
    return None


@functools.cache
def _allowed_values() -> dict:
    hints = typing.get_type_hints(KVMethod)
    return {f.name: _allowed(hints[f.name]) for f in fields(KVMethod)}


def _check_fields(m: KVMethod) -> None:
    """Refuse a value outside a field's ``Literal`` type and windows / group sizes that are not counts."""
    if not isinstance(m.name, str) or not m.name:  # the label of every table row and JSON key
        raise InputError(f"KVMethod name must be a non-empty string, got {m.name!r}")
    for name, allowed in _allowed_values().items():
        value = getattr(m, name)
        if allowed is not None and (isinstance(value, bool) or value not in allowed):
            raise InputError(f"KVMethod {m.name!r}: {name}={value!r} is not one of "
                             f"{', '.join(map(repr, allowed))}")
    for name, low in (("sink", 0), ("recent", 0), ("group_size", 1), ("page", 1)):
        v = getattr(m, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise InputError(f"KVMethod {m.name!r}: {name} must be an integer >= {low}, got {v!r}")


# ------------------------------------------------------------------- the registry
# oscar-plus = centering + one rotation per KV head on the paper's recipe. Measured (docs/ACCURACY.md section 5),
# default windows, context 4096, centered uniform levels: per KV head vs per layer KL 0.0605 vs 0.0696
# (ppl +6.1% vs +7.7%) on SmolLM2-135M, 0.0356 vs 0.0369 (+1.4% vs +1.5%) on Qwen2.5-Coder-1.5B (at 2048
# tokens a tie there: 0.0329 both; on stdlib-docstrings Qwen 0.0260 vs 0.0274, SmolLM2 0.0534 vs 0.0499).
# Lloyd-Max levels on top are worse on both (SmolLM2 0.0727; Qwen at 2048 0.0385), so not part of the recipe.
PLUS_LEVELS = "uniform"
PLUS_PER_HEAD = True
# Measured (docs/ACCURACY.md section 5): the exact key rescale helps Qwen2.5-Coder-1.5B a little (KL 0.0385 ->
# 0.0372) but hurts SmolLM2 (0.0727 -> 0.0934), so oscar-plus leaves it off; `calibrate --plus --key-scale` keeps it.
PLUS_KEY_SCALE = False

# name -> definition. Windows, group size, scale dtype and page come from ``make_method``'s shared
# settings; ``clip`` / ``center`` / ``levels`` are each method's defaults, overridable where TUNABLE says.
METHODS: dict[str, KVMethod] = {
    "bf16": KVMethod("bf16", bits=None),
    "naive": KVMethod("naive"),
    "hadamard": KVMethod("hadamard", rotation="hadamard", center="auto"),
    "kivi": KVMethod("kivi", key_axis="channel"),
    "int4": KVMethod("int4", bits=4, rotation="hadamard", center="auto"),
    "oscar": KVMethod("oscar", rotation="calibrated", clip="fitted"),
    "oscar-plus": KVMethod("oscar-plus", rotation="calibrated", clip="fitted", levels=PLUS_LEVELS, center="on"),
}
METHOD_NAMES = tuple(METHODS)
# which defaults make_method's clip= / levels= / center= may override (bf16 and kivi neither clip nor
# center; only oscar takes levels=, oscar-plus's are part of its recipe)
TUNABLE = {
    "bf16": (),
    "naive": ("clip", "center"),
    "hadamard": ("clip", "center"),
    "kivi": (),
    "int4": ("clip", "center"),
    "oscar": ("clip", "levels", "center"),
    "oscar-plus": ("clip", "center"),
}
_SUFFIXES = {"+center": ("center", "on"), "+nocenter": ("center", "off"),
             "+keyscale": ("key_scale", "on"), "+nokeyscale": ("key_scale", "off"), "+q8": ("query", "int8"),
             "+log8": ("scale_dtype", "log8")}


def make_method(
    name: str,
    sink: int = 64,
    recent: int = 256,
    group_size: int = 128,
    scale_dtype: str = "float16",
    clip: str | None = None,
    levels: str = "uniform",
    page: int = 16,
    center: str | None = None,
) -> KVMethod:
    """``METHODS[name]`` with shared window/group settings. ``name`` may end in "+center" / "+nocenter"
    (centering on / off), "+keyscale" / "+nokeyscale" (calibrated methods: insist on a file with /
    without the key rescale), "+q8" (the INT2 history scored with an int8 query, as the CUDA decode
    kernel does; evaluation only) and "+log8" (scale and zero stored as log8 bytes, ``scale_dtype="log8"``, beside
    the same method on fp16 ones in one evaluation), e.g. ``oscar+center``; the method keeps that label as its name.
    ``page`` is the demotion page B of the window rule (``KVMethod.int2_len``)."""
    if clip is not None and clip not in CLIP_MODES:
        raise InputError(f"clip must be one of {CLIP_MODES}, got {clip!r}")
    if center is not None and center not in CENTER_MODES:
        raise InputError(f"center must be one of {CENTER_MODES}, got {center!r}")
    if levels is not None and levels not in LEVEL_MODES:  # refused even where a method does not use it
        raise InputError(f"levels={levels!r} is not one of {', '.join(map(repr, LEVEL_MODES))}")
    if not isinstance(name, str):
        raise InputError(f"a method name must be a string, one of {', '.join(METHOD_NAMES)}; got {name!r}")
    label, over = name, {}
    while True:  # strip the label suffixes, outermost first
        suffix = next((x for x in _SUFFIXES if name.endswith(x)), None)
        if suffix is None:
            break
        field, value = _SUFFIXES[suffix]
        if over.get(field, value) != value:  # e.g. oscar+center+nocenter: the last one silently won
            raise InputError(f"method {label!r}: the suffixes {suffix} and +{'no' if value == 'on' else ''}"
                             f"{field.replace('_', '')} contradict each other; keep one")
        over.setdefault(field, value)
        name = name[: -len(suffix)]
    if name not in METHODS:
        raise InputError(f"unknown method {name!r}; choose from {', '.join(METHOD_NAMES)}")
    m = METHODS[name]
    if "center" in over:
        center = over["center"]
    if center is not None and center != "off" and "center" not in TUNABLE[name]:
        raise InputError(f"method {name!r} does not support centering")
    if "key_scale" in over and m.rotation != "calibrated":
        raise InputError(f"+keyscale / +nokeyscale apply to calibrated methods (oscar, oscar-plus), not {name!r}")
    if "scale_dtype" in over:
        if not m.quantized or m.per_channel_keys:
            raise InputError(f"+log8 (one-byte scale / zero) applies to token-wise quantized methods "
                             f"(naive, hadamard, int4, oscar, oscar-plus), not {name!r}")
        scale_dtype = over["scale_dtype"]
    if "query" in over and (not m.quantized or m.per_channel_keys):
        raise InputError(f"+q8 (the CUDA kernel's int8 query) applies to token-wise quantized methods "
                         f"(naive, hadamard, int4, oscar, oscar-plus), not {name!r}")
    given = {"clip": clip, "levels": levels, "center": center}
    tuned = {k: v for k, v in given.items() if k in TUNABLE[name] and v is not None}
    m = replace(m, sink=sink, recent=recent, group_size=group_size, scale_dtype=scale_dtype, page=page,
                key_scale=over.get("key_scale", m.key_scale), query=over.get("query", m.query), **tuned)
    return m if label == m.name else replace(m, name=label)


def parse_methods(spec: str, **kw) -> list[KVMethod]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise InputError("no methods given; e.g. --methods bf16,naive,hadamard,kivi,int4,oscar")
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:  # evaluated twice, one result overwriting the other
        raise InputError(f"method {twice!r} is listed twice in {spec!r}")
    return [make_method(n, **kw) for n in names]
