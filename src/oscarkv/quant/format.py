"""Token-wise asymmetric low-bit KV format: the torch reference every kernel is checked against.

A KV row x (one token, one KV head, ``head_dim`` values, already rotated) is split into groups of
``group_size`` contiguous values. Per group we store a scale s and a zero z (both in ``scale_dtype``)
and one b-bit code per value:

    m, M   = min(x_g), max(x_g)          (after the optional row clip, see ``clip_rows``)
    s      = max(M - m, 1e-8) / (2**b - 1)
    z      = m                             value-domain zero point
    code   = argmin_c |x - (z + s * level[c])|   (uniform levels: round((x - z) / s))
    x_hat  = z + s * level[code]           (uniform: level[c] = c)

Departure from the authors' kernels (spec section 3.1): they store z = -m/s in *code* units and
dequantize (c - z) * s. With a 16-bit zero that loses precision whenever |m| >> s (z of 10^4 has a
spacing of 8 in fp16). Storing the value-domain offset m is the same affine map without that
problem, and it lets non-uniform (Lloyd-Max) levels reuse the same two numbers.

``scale_dtype="log8"``: scale and zero in one byte each instead of two (issue 7: 34 bytes per token and KV head
at head_dim 128 instead of 36, 5.6% fewer for the bandwidth-bound decode kernel). Not in the spec.

    scale  s = 2**(T - e / 32),  e = 0 .. 254 a uint8 (255 marks a non-finite row: dequantized NaN),
           T = ``cfg.scale_top`` (an integer per K/V config, i.e. per layer: the largest scale, 2**T, sits at
           e = 0; 255 steps of 2**(1/32) span ~8 octaves below it); e = the step nearest in log2 (the
           float32 midpoints ``LOG8_MIDS``, so every implementation picks the same e), clamped to 0 .. 254
    zero   z = s * zq / 4,  zq = round(4 m / s) clamped to [-128, 127], stored as the uint8 zq + 128
           (the group minimum m rounded to a quarter of the group's own step)

Codes are then chosen against these s and z exactly as for the float formats. Accuracy (docs/ACCURACY.md section 7):
simulated on SmolLM2-135M and Qwen2.5-Coder-1.5B before it became a format ("log32-zq4": KL within -4.6% / +0.3% of
fp16's), then measured through it on SmolLM2 with calibrated tops (KL +2.3% oscar, +0.4% oscar-plus).

Bit order ("quartered" packing, spec section 3.2). With p = 8 // bits codes per byte and
n = head_dim // p bytes per row, byte j holds the codes of coordinates j, j + n, j + 2n, ... at bit
offsets 0, bits, 2*bits, ...:

    INT2: byte_j = c[j] | c[j + d/4] << 2 | c[j + d/2] << 4 | c[j + 3d/4] << 6
    INT4: byte_j = c[j] | c[j + d/2] << 4

so each bit plane of the packed row is a contiguous quarter (half) of the head dimension, which is
what a decode kernel wants to unpack into a tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from ..errors import InputError

SUPPORTED_BITS = (2, 4)
# "log8": a uint8 step count (scale) and a biased uint8 quarter-step count (zero), see the module docstring
_SCALE_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "log8": torch.uint8}
LOG8_STEPS = 32  # steps per octave of the log8 scale
LOG8_NAN = 255   # the log8 scale byte of a non-finite row
LOG8_TOP_RANGE = (-100, 100)  # scale_top bounds: 2**T and 2**(T - 8) stay normal float32 numbers
# 2**(-e / 32) for e = 0 .. 254 as float32 (NaN at 255), and the float32 midpoints 2**(-(k + 1/2) / 32), k = 0 .. 254
# (descending) whose count above s * 2**-T is e: the one table of the format (the CUDA kernels read copies of it)
LOG8_SCALES = torch.cat([torch.exp2(-torch.arange(255, dtype=torch.float64) / LOG8_STEPS).float(),
                         torch.tensor([float("nan")])])
LOG8_MIDS = torch.exp2(-(torch.arange(255, dtype=torch.float64) + 0.5) / LOG8_STEPS).float()


def storage_dtype(name_or_dtype) -> torch.dtype:
    """The torch dtype of a ``scale_dtype`` name ("float16", "bfloat16", "float32"; "log8": uint8) or dtype."""
    if isinstance(name_or_dtype, torch.dtype):
        return name_or_dtype
    try:
        return _SCALE_DTYPES[str(name_or_dtype).replace("torch.", "")]
    except KeyError:
        raise InputError(
            f"scale_dtype {name_or_dtype!r} is not supported; use one of {sorted(_SCALE_DTYPES)}"
        ) from None


@dataclass(frozen=True)
class QuantConfig:
    """How one KV tensor (K or V) is quantized.

    bits:        2 (four levels) or 4.
    group_size:  values per (scale, zero) pair along head_dim; clamped to head_dim when larger.
    clip_ratio:  rho in (0, 1): each row is clamped to +-tau with tau = sort(|x|)[floor(rho * d)]
                 (spec section 2). None, <= 0 or >= 1 disables clipping.
    scale_dtype: storage dtype of scale and zero ("float16", "bfloat16" or "float32"), or "log8" (one byte
                 each, module docstring).
    levels:      optional non-uniform reconstruction levels in code units (sorted, 2**bits values in
                 [0, 2**bits - 1]); None means uniform levels 0, 1, ..., 2**bits - 1.
    scale_top:   "log8" only (and required there): the integer T of the largest scale 2**T (``log8_top``
                 picks it from data).
    """

    bits: int = 2
    group_size: int = 128
    clip_ratio: float | None = None
    scale_dtype: str = "float16"
    levels: tuple[float, ...] | None = field(default=None)
    scale_top: int | None = None

    def __post_init__(self):
        if self.bits not in SUPPORTED_BITS:
            raise InputError(f"bits={self.bits} is not supported; use one of {SUPPORTED_BITS}")
        if self.group_size <= 0:
            raise InputError(f"group_size must be positive, got {self.group_size}")
        storage_dtype(self.scale_dtype)
        if self.log8:
            lo, hi = LOG8_TOP_RANGE
            top = self.scale_top
            if not isinstance(top, int) or isinstance(top, bool) or not lo <= top <= hi:
                raise InputError(f"scale_dtype='log8' needs scale_top, an integer in [{lo}, {hi}] (log2 of the largest "
                                 f"scale; oscarkv.quant.log8_top(rows, cfg) picks it), got {self.scale_top!r}")
        elif self.scale_top is not None:
            raise InputError(f"scale_top is for scale_dtype='log8' only (got scale_dtype={self.scale_dtype!r})")
        if self.clip_ratio is not None and not (0.0 <= self.clip_ratio <= 1.0):  # NaN fails too
            raise InputError(f"clip_ratio must be in (0, 1] (0, 1 or None = no clipping), got {self.clip_ratio}")
        if self.levels is not None:
            lv = list(self.levels)
            if len(lv) != 2**self.bits:
                raise InputError(f"levels needs {2**self.bits} values for {self.bits}-bit codes, got {len(lv)}")
            if not all(math.isfinite(float(x)) for x in lv):
                raise InputError(f"levels must be finite, got {lv}")
            if any(b < a for a, b in zip(lv, lv[1:])):
                raise InputError(f"levels must be sorted ascending, got {lv}")

    @property
    def log8(self) -> bool:
        return self.scale_dtype == "log8"

    @property
    def n_levels(self) -> int:
        return 2**self.bits

    @property
    def clips(self) -> bool:
        return self.clip_ratio is not None and 0.0 < self.clip_ratio < 1.0

    def group(self, head_dim: int) -> int:
        g = min(self.group_size, head_dim)
        if head_dim % g:
            raise InputError(f"head_dim {head_dim} is not a multiple of group_size {g}; pick a divisor of head_dim")
        return g

    def level_tensor(self, device=None) -> torch.Tensor:
        if self.levels is None:
            return torch.arange(self.n_levels, dtype=torch.float32, device=device)
        return torch.tensor(self.levels, dtype=torch.float32, device=device)


@dataclass
class QuantizedRows:
    """Packed rows: codes ``[..., head_dim * bits // 8]`` uint8, scale and zero ``[..., head_dim // group]``."""

    codes: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    head_dim: int
    bits: int

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.codes, self.scale, self.zero))

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.codes.shape[:-1], self.head_dim)

    def index(self, idx) -> "QuantizedRows":
        """Select along the leading (row) dims, e.g. ``q.index((slice(None), slice(None), slice(0, 5)))``."""
        return QuantizedRows(self.codes[idx], self.scale[idx], self.zero[idx], self.head_dim, self.bits)

    @staticmethod
    def cat(parts: list["QuantizedRows"], dim: int) -> "QuantizedRows":
        p0 = parts[0]
        return QuantizedRows(
            torch.cat([p.codes for p in parts], dim),
            torch.cat([p.scale for p in parts], dim),
            torch.cat([p.zero for p in parts], dim),
            p0.head_dim,
            p0.bits,
        )


def clip_index(clip_ratio: float | None, d: int) -> int:
    """Sort index of the clip threshold: tau = sort(|x|)[clip_index] with floor(rho * d) clamped to
    [0, d - 1]. No clipping (None, rho <= 0 or rho >= 1) is d - 1 (tau = max|x|, a no-op), so ratios
    with the same index clip identically."""
    if clip_ratio is None or not (0.0 < clip_ratio < 1.0):
        return d - 1
    return min(max(int(clip_ratio * d), 0), d - 1)


def clamp_rows(x: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """x clamped to [-tau, tau] (tau broadcasts over the last dim)."""
    return torch.maximum(torch.minimum(x, tau), -tau)


def clip_rows(x: torch.Tensor, clip_ratio: float | None) -> torch.Tensor:
    """Clamp each row (last dim) to +-tau, tau = sort(|x|)[clip_index(rho, d)]."""
    if clip_ratio is None or not (0.0 < clip_ratio < 1.0):
        return x
    k = clip_index(clip_ratio, x.shape[-1])
    return clamp_rows(x, x.abs().sort(dim=-1).values[..., k : k + 1])


def group_scale_zero(x: torch.Tensor, cfg: QuantConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows ``x [..., d]`` -> (xg, scale, zero): xg the float32 rows after ``cfg``'s clip, grouped
    ``[..., d // g, g]``; scale = (max - min) / (2**bits - 1) and zero = min per group ``[..., d // g]``,
    as stored in ``cfg.scale_dtype`` (rounded to it; "log8": the two bytes of the module docstring).
    ``scale_zero_values`` turns them into the float32 values codes are chosen against and dequantized with."""
    d = x.shape[-1]
    g = cfg.group(d)
    sdt = storage_dtype(cfg.scale_dtype)
    xf = clip_rows(x.float(), cfg.clip_ratio if cfg.clips else None)
    xg = xf.reshape(*xf.shape[:-1], d // g, g)
    lo, hi = xg.amin(-1), xg.amax(-1)
    scale = (hi - lo).clamp_min(1e-8) / (cfg.n_levels - 1)
    if not cfg.log8:
        return xg, scale.to(sdt), lo.to(sdt)
    e = log8_encode(scale, cfg.scale_top)
    s = _log8_scale(e, cfg.scale_top)
    zq = torch.round(4 * lo / s).clamp_(-128, 127)
    return xg, e, (zq + 128).to(torch.uint8)


def log8_encode(scale: torch.Tensor, top: int) -> torch.Tensor:
    """uint8 e of float32 scales: the count of ``LOG8_MIDS`` above scale * 2**-top, clamped to 0 .. 254 (NaN: 255)."""
    sn = scale.float() * 2.0 ** -top  # exact (a power of two)
    mids = LOG8_MIDS.to(scale.device).flip(0)  # ascending
    e = (255 - torch.searchsorted(mids, sn.contiguous(), right=True)).clamp_(max=254)
    return torch.where(torch.isnan(sn), LOG8_NAN, e).to(torch.uint8)


def log8_top(x: torch.Tensor, cfg: QuantConfig, headroom: int = 1) -> int:
    """A ``scale_top`` for rows like ``x`` (``cfg``'s bits, group and clip): ceil(log2(largest scale)) + headroom,
    so that later rows up to 2**headroom times larger keep their exact range."""
    probe = QuantConfig(cfg.bits, cfg.group_size, cfg.clip_ratio, "float32", cfg.levels)
    s = group_scale_zero(x, probe)[1].amax()
    t = math.ceil(math.log2(max(float(s), 1e-30))) + headroom
    lo, hi = LOG8_TOP_RANGE
    return min(max(t, lo), hi)


def _log8_scale(e: torch.Tensor, top: int) -> torch.Tensor:
    return LOG8_SCALES.to(e.device)[e.long()] * 2.0**top


def scale_zero_values(scale: torch.Tensor, zero: torch.Tensor,
                      cfg: QuantConfig | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Stored scale and zero (``group_scale_zero``, ``QuantizedRows``) as the float32 values of the format: the one
    decoder (a float scale_dtype is its own value; "log8" needs ``cfg``)."""
    if scale.dtype != torch.uint8:
        return scale.float(), zero.float()
    if cfg is None or not cfg.log8:
        raise InputError("log8 scale/zero bytes need their QuantConfig (scale_dtype='log8', scale_top) to be decoded")
    s = _log8_scale(scale, cfg.scale_top)
    return s, s * (zero.float() - 128) / 4


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack integer codes ``[..., d]`` (values < 2**bits) into uint8 ``[..., d * bits // 8]`` (quartered order)."""
    per = 8 // bits
    d = codes.shape[-1]
    if d % per:
        raise InputError(f"head_dim {d} must be a multiple of {per} to pack {bits}-bit codes")
    n = d // per
    c = codes.to(torch.uint8).reshape(*codes.shape[:-1], per, n)
    out = torch.zeros(*codes.shape[:-1], n, dtype=torch.uint8, device=codes.device)
    for k in range(per):
        out |= c[..., k, :] << (k * bits)
    return out


def unpack_codes(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """Inverse of ``pack_codes``: uint8 ``[..., n]`` -> uint8 codes ``[..., n * 8 // bits]``."""
    per = 8 // bits
    mask = (1 << bits) - 1
    planes = [(packed >> (k * bits)) & mask for k in range(per)]
    return torch.cat(planes, dim=-1)


def _check_finite(x: torch.Tensor) -> None:
    if not torch.isfinite(x).all():
        # min/max of a group with a NaN/inf is NaN/inf: every code and scale would be garbage
        raise InputError("cannot quantize K/V rows containing NaN or inf; the model produced non-finite "
                         "activations (try float32 instead of float16/bfloat16)")


def _codes(x: torch.Tensor, cfg: QuantConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes as float ``[..., d // g, g]``, scale, zero) of rows ``x``: nearest level to each value."""
    xg, scale, zero = group_scale_zero(x, cfg)
    top = cfg.n_levels - 1
    sf, zf = scale_zero_values(scale, zero, cfg)
    u = (xg - zf[..., None]) / sf[..., None]  # position in code units
    if cfg.levels is None:
        return torch.floor(u + 0.5).clamp_(0, top), scale, zero
    lv = cfg.level_tensor(x.device)
    bounds = (lv[1:] + lv[:-1]) / 2  # nearest level = count of midpoints below u
    return torch.bucketize(u.contiguous(), bounds, right=True).clamp_(0, top).float(), scale, zero


def quantize(x: torch.Tensor, cfg: QuantConfig) -> QuantizedRows:
    """Quantize rows of ``x`` (``[..., head_dim]``, any float dtype) to packed codes + scale/zero."""
    _check_finite(x)
    d = x.shape[-1]
    codes, scale, zero = _codes(x, cfg)
    return QuantizedRows(pack_codes(codes.reshape(*x.shape[:-1], d), cfg.bits), scale, zero, d, cfg.bits)


def dequantize(q: QuantizedRows, cfg: QuantConfig | None = None, dtype=torch.float32) -> torch.Tensor:
    """Rows ``[..., head_dim]`` in ``dtype`` from packed codes (levels from ``cfg`` when non-uniform)."""
    codes = unpack_codes(q.codes, q.bits).float()
    if cfg is not None and cfg.levels is not None:
        codes = cfg.level_tensor(codes.device)[codes.long()]
    ng = q.scale.shape[-1]
    g = q.head_dim // ng
    cg = codes.reshape(*codes.shape[:-1], ng, g)
    sf, zf = scale_zero_values(q.scale, q.zero, cfg)
    x = zf[..., None] + sf[..., None] * cg
    return x.reshape(*codes.shape[:-1], q.head_dim).to(dtype)


def fake_quantize(x: torch.Tensor, cfg: QuantConfig) -> torch.Tensor:
    """``dequantize(quantize(x, cfg), cfg)`` in one call without packing the codes (evaluation fast
    paths, the clip search's inner loop); same dtype as ``x``, bit-identical values."""
    _check_finite(x)
    codes, scale, zero = _codes(x, cfg)
    if cfg.levels is not None:
        codes = cfg.level_tensor(codes.device)[codes.long()]
    sf, zf = scale_zero_values(scale, zero, cfg)
    return (zf[..., None] + sf[..., None] * codes).reshape(x.shape).to(x.dtype)
