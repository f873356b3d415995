"""The KV-cache methods we compare, by name, and what each one does to a layer's K and V.

    bf16      unquantized (stored in the model's dtype: float32 on CPU, bf16 on GPU)
    naive     token-wise INT2 per group, no rotation, no clipping
    hadamard  QuaRot-style: data-free Hadamard H_d per layer, token-wise INT2, no clipping
    kivi      KIVI-2: keys per *channel* over blocks of `group_size` tokens, values per token;
              a full-precision residual holds the tokens of the incomplete block
    int4      Saw-INT4-style reference row: Hadamard + token-wise INT4 (full H_d rather than the
              block-diagonal Hadamard of SAW-INT4: same cost at head_dim <= 128, no worse accuracy)
    oscar     calibrated R = U.H.P_br per layer (K and V), clip ratios from the rotation file (the paper)
    oscar-plus  the best measured recipe beyond the paper (issue 10, docs/ACCURACY.md section 5): the
              paper's calibrated rotation and fitted clip on exactly centered K and V (calibrated
              means); needs a file from `oscar-kv calibrate --plus`. Per-KV-head rotations, Lloyd-Max
              levels and the exact key rescale (`--per-head`, `--levels lloyd-max`, `--key-scale`) did not
              help on BOTH measured models, so they are options, not part of it. A name may carry
              "+keyscale" / "+nokeyscale" to insist on a file with / without the key rescale.
Centering (rotation/centering.py, exact and free at run time) is used by: oscar-plus (always), hadamard
and int4 (whenever the rotation file passed has calibrated means: "auto"), never by naive, kivi (its
per-channel key groups already absorb channel offsets) or oscar (kept faithful to the paper). A name
may carry "+center" / "+nocenter" (e.g. ``oscar+center``, ``hadamard+nocenter``) for ablations.

All methods share the same BF16 windows (``sink`` first tokens, ``recent`` last tokens) so a table
compares quantizers at equal bits; ``sink=recent=0, page=1`` gives pure INT2.

The window rule (TEAM decision 1) has ONE definition, ``KVMethod.int2_len`` / ``KVMethod.held_quantized``:
a sequence of t tokens holds tokens [S, S + int2_len(t)) quantized with
int2_len(t) = B * floor(max(0, t - S - W) / B), B = the demotion page (``page``, default 16 like the
GPU pool's block size; KIVI: its key block ``group_size``). The sink [0, min(t, S)) and the recent
tokens [S + int2_len, t) (W .. W + B - 1 of them) stay in high precision. The CPU cache
(cache/layers.py), the banded evaluation (eval/banded.py) and the GPU cache all derive from it.

Everything here is a torch reference: the cache, the evaluation fast path and the kernels' tests
all go through ``quantize_rows`` / ``quantize_key_blocks`` so there is one definition per operation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .calibrate.clip import DEFAULT_CLIP_K, DEFAULT_CLIP_V
from .quant import QuantConfig, dequantize, int_region_bits, kv_cache_bytes, mixed_bits_per_element, quantize
from .rotation import RotationSet, hadamard, rotate, unrotate
from .rotation.centering import center, uncenter
from .errors import InputError

METHOD_NAMES = ("bf16", "naive", "hadamard", "kivi", "int4", "oscar", "oscar-plus")
CENTER_MODES = ("off", "on", "auto")  # auto: centered iff the rotation file has calibrated means
CLIP_MODES = ("fitted", "default", "off")


@dataclass(frozen=True)
class KVMethod:
    name: str
    bits: int | None = 2  # None: unquantized
    rotation: str = "none"  # "none" | "hadamard" | "calibrated"
    key_axis: str = "token"  # "token" | "channel" (KIVI keys)
    group_size: int = 128
    sink: int = 64
    recent: int = 256
    clip: str = "off"  # "fitted" (from the rotation file) | "default" (0.96 / 0.92) | "off"
    scale_dtype: str = "float16"
    levels: str = "uniform"  # "uniform" | "lloyd-max" (levels from the rotation file)
    center: str = "off"  # CENTER_MODES: subtract the calibrated mu_K / mu_V (rotation/centering.py)
    key_scale: str = "any"  # "on" / "off": require a file with / without the key rescale (a label check)
    page: int = 16  # demotion page B of the window rule (1 = demote every token as it leaves the window)

    def __post_init__(self):
        check_method_fields(self)

    @property
    def quantized(self) -> bool:
        return self.bits is not None

    # --------------------------------------------------------------- the window rule
    @property
    def demotion_unit(self) -> int:
        """Tokens demoted together: the page B, or for KIVI its whole key block (``page`` is unused there)."""
        return self.group_size if self.key_axis == "channel" else self.page

    def int2_len(self, t):
        """THE window rule: how many tokens a sequence of ``t`` tokens holds quantized, as the tokens
        [sink, sink + int2_len(t)). ``t`` is an int or an integer tensor (then elementwise)."""
        if not self.quantized:
            return torch.zeros_like(t) if torch.is_tensor(t) else 0
        u, over = self.demotion_unit, t - self.sink - self.recent
        if torch.is_tensor(over):
            return torch.clamp(over, min=0) // u * u
        return max(0, over) // u * u

    def held_quantized(self, j, t) -> torch.Tensor:
        """Bool (broadcast of j and t): is token j held quantized when the sequence holds t tokens?
        j and t count a row's own tokens (after its left padding)."""
        j, t = torch.as_tensor(j), torch.as_tensor(t)
        return (j >= self.sink) & (j < self.sink + self.int2_len(t))

    def with_windows(self, sink: int, recent: int, page: int | None = None) -> "KVMethod":
        return replace(self, sink=sink, recent=recent, page=self.page if page is None else page)

    # --------------------------------------------------------------- accounting
    def scale_bits(self) -> int:
        return torch.finfo(getattr(torch, self.scale_dtype)).bits

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
        if self.key_axis == "token" and head_dim % g:
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
        k_cfg = QuantConfig(self.bits, g, k_clip, self.scale_dtype, k_lv)
        v_cfg = QuantConfig(self.bits, g, v_clip, self.scale_dtype, v_lv)
        if self.key_axis == "channel":  # KIVI: groups run along tokens, clip never applies
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
    """What to do with one layer's K and V. Rotations are [R, d, d] (R = 1 or num_kv_heads) or None."""

    k_cfg: QuantConfig | None
    v_cfg: QuantConfig | None
    k_rot: torch.Tensor | None
    v_rot: torch.Tensor | None
    key_axis: str = "token"
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


LEVELS = ("uniform", "lloyd-max")
ROTATIONS = ("none", "hadamard", "calibrated")
KEY_AXES = ("token", "channel")


def check_method_fields(m: KVMethod) -> None:
    """Refuse a KVMethod that would silently do something else (e.g. levels="lloyd_max" meant uniform)."""
    def bad(field, value, allowed):
        raise InputError(f"KVMethod {m.name!r}: {field}={value!r} is not one of {', '.join(map(repr, allowed))}")

    if m.bits not in (None, 2, 4):
        bad("bits", m.bits, (None, 2, 4))
    if m.rotation not in ROTATIONS:
        bad("rotation", m.rotation, ROTATIONS)
    if m.key_axis not in KEY_AXES:
        bad("key_axis", m.key_axis, KEY_AXES)
    if m.clip not in CLIP_MODES:
        bad("clip", m.clip, CLIP_MODES)
    if m.levels not in LEVELS:
        bad("levels", m.levels, LEVELS)
    if getattr(m, "center", "off") not in CENTER_MODES:
        bad("center", m.center, CENTER_MODES)
    for name, lo in (("sink", 0), ("recent", 0), ("group_size", 1), ("page", 1)):
        v = getattr(m, name, lo)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise InputError(f"KVMethod {m.name!r}: {name} must be an integer >= {lo}, got {v!r}")
    if m.scale_dtype not in ("float16", "bfloat16", "float32"):
        bad("scale_dtype", m.scale_dtype, ("float16", "bfloat16", "float32"))


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
    """A method by name (see ``METHOD_NAMES``, optionally + "+center" / "+nocenter") with shared
    window/group settings; ``page`` is the demotion page B of the window rule (``KVMethod.int2_len``)."""
    if sink < 0 or recent < 0:
        raise InputError("sink and recent must be >= 0")
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise InputError(f"page (tokens demoted together) must be an int >= 1, got {page!r}")
    if clip is not None and clip not in CLIP_MODES:
        raise InputError(f"clip must be one of {CLIP_MODES}, got {clip!r}")
    if levels not in LEVELS:
        raise InputError(f"levels={levels!r} is not one of {', '.join(map(repr, LEVELS))}")
    base = dict(sink=sink, recent=recent, group_size=group_size, scale_dtype=scale_dtype, page=page)
    label = name
    key_scale = "any"
    for suffix, ks in (("+keyscale", "on"), ("+nokeyscale", "off")):
        if name.endswith(suffix):
            name, key_scale = name[: -len(suffix)], ks
    for suffix, mode in (("+center", "on"), ("+nocenter", "off")):
        if name.endswith(suffix):
            name, center = name[: -len(suffix)], mode
    if center is not None and center not in CENTER_MODES:
        raise InputError(f"center must be one of {CENTER_MODES}, got {center!r}")
    if center is not None and name in ("bf16", "kivi") and center != "off":
        raise InputError(f"method {name!r} does not support centering")
    m = _make(name, clip, levels, center, base)
    if key_scale != "any":
        if m.rotation != "calibrated":
            raise InputError(f"+keyscale / +nokeyscale apply to calibrated methods (oscar, oscar-plus), not {name!r}")
        m = replace(m, key_scale=key_scale)
    return m if label == m.name else replace(m, name=label)


def _make(name, clip, levels, center, base) -> KVMethod:
    if name == "bf16":
        return KVMethod("bf16", bits=None, **base)
    if name == "naive":
        return KVMethod("naive", clip=clip or "off", center=center or "off", **base)
    if name == "hadamard":
        return KVMethod("hadamard", rotation="hadamard", clip=clip or "off", center=center or "auto", **base)
    if name == "kivi":
        return KVMethod("kivi", key_axis="channel", **base)
    if name == "int4":
        return KVMethod("int4", bits=4, rotation="hadamard", clip=clip or "off", center=center or "auto", **base)
    if name == "oscar":
        return KVMethod("oscar", rotation="calibrated", clip=clip or "fitted", levels=levels, center=center or "off", **base)
    if name == "oscar-plus":
        return KVMethod("oscar-plus", rotation="calibrated", clip=clip or "fitted",
                        levels=levels if levels != "uniform" else PLUS_LEVELS, center=center or "on", **base)
    raise InputError(f"unknown method {name!r}; choose from {', '.join(METHOD_NAMES)}")


# oscar-plus = centering on the paper's recipe. Measured (docs/ACCURACY.md section 5), default windows: centered
# per-layer uniform (the `oscar+center` rows) KL 0.0329 on Qwen2.5-Coder-1.5B vs 0.0385 with per-head
# rotations + Lloyd-Max, 0.0696 vs 0.0727 on SmolLM2; so neither is part of the recipe.
PLUS_LEVELS = "uniform"
PLUS_PER_HEAD = False
# Measured (docs/ACCURACY.md section 5): the exact key rescale helps Qwen2.5-Coder-1.5B a little (KL 0.0385 ->
# 0.0372) but hurts SmolLM2 (0.0727 -> 0.0934), so oscar-plus leaves it off; `calibrate --plus --key-scale` keeps it.
PLUS_KEY_SCALE = False


def parse_methods(spec: str, **kw) -> list[KVMethod]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise InputError("no methods given; e.g. --methods bf16,naive,hadamard,kivi,int4,oscar")
    return [make_method(n, **kw) for n in names]


# ------------------------------------------------------------------- reference ops
def quantize_rows(x: torch.Tensor, cfg: QuantConfig, r: torch.Tensor | None, mean: torch.Tensor | None = None):
    """Token-wise: (center,) rotate, then quantize rows of x [B, H, T, d]. Returns packed rows of
    (x - mean) @ R (rotated, centered basis)."""
    return quantize(rotate(center(x.float(), mean), r), cfg)


def fake_quant_rows(x: torch.Tensor, cfg: QuantConfig, r: torch.Tensor | None, rotated_out: bool = False,
                    mean: torch.Tensor | None = None, r_query: torch.Tensor | None = None):
    """quantize_rows -> dequantize; back in the original basis (mean added back) unless ``rotated_out``
    (then the rows stay rotated *and* centered, as the cache stores them). ``r_query``: M^-T when the
    transform r = M is not orthogonal (reading back is x @ M^-1 = x @ r_query^T)."""
    xh = dequantize(quantize_rows(x, cfg, r, mean), cfg)
    return (xh if rotated_out else uncenter(unrotate(xh, r if r_query is None else r_query), mean)).to(x.dtype)
