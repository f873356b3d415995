"""What a rotation set must satisfy before any of it is used: the ONE place these rules live.

Every rotation source goes through ``validate_rotation_set``: ``RotationSet.load`` (our files),
``import_rotationzoo`` (the authors' ``.pt`` files) and ``OscarCache`` (sets built in memory). A file
that breaks a rule is refused with one line naming the tensor, the layer and the fix, instead of
giving a plausible but wrong perplexity later (a random K rotation gave ppl 33,485 with exit code 0).

Rules per tensor (``RULES``; L layers, R_k / R_v rotations per layer, d = head_dim, n = 2**bits levels):

    k_rotation, v_rotation        [L, R, d, d]  finite, orthogonal: max |R R^T - I| <= tol (NaN fails)
    k_eigenvalues, v_eigenvalues  [L, R, d]     finite
    k_clip, v_clip                [L]           finite, in (0, 1] or exactly 0 (= no clipping)
    k_levels, v_levels            [L, n]        finite, sorted ascending, within [0, n - 1] (code units)
    k_mean, v_mean                [L, 1 or H, d] finite (format 2: centering means per KV head)
    k_scale_top, v_scale_top      [L]           integers in quant.format.LOG8_TOP_RANGE (the log8 format's T)
    (clip, levels, means and scale tops come in K / V pairs: both or neither, ``PAIRS``)
    k_query_rotation              [L, R_k, d, d] finite, and Q M^T = I with M = k_rotation (format 2: a
                                                non-orthogonal key transform M = S.R, queries Q = M^-T);
                                                when present, k_rotation itself need not be orthogonal

To add a tensor to the file format (e.g. centering vectors mu_K / mu_V), add one ``Rule`` to ``RULES``
(its expected shape from ``Dims`` and a value check) and a field of the same name to ``RotationSet``.
Comparisons are written so that NaN fails them (``not (err <= tol)``, never ``err > tol``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..errors import InputError

# float32 rotations checked in float64: a clean float32 orthogonal matrix is ~1e-6 off; a bf16 copy
# ~1e-2. 1e-3 refuses anything that would visibly change attention scores (q.k error ~ tol * |q||k|).
ORTHO_TOL = 1e-3
LEVEL_TOL = 1e-4

FIX = "re-create it with `oscar-kv calibrate` (or re-import the RotationZoo files)"


class RotationFileError(InputError):
    """A rotation set whose contents break what the math needs (non-orthogonal, non-finite, bad shape)."""


@dataclass(frozen=True)
class Dims:
    """Sizes a rotation set's tensors must agree on (from the rotations themselves and the metadata)."""

    layers: int
    rk: int  # K rotations per layer (1 or num_kv_heads)
    rv: int
    head_dim: int
    n_levels: int
    kv_heads: int | None = None  # from the metadata when present


@dataclass(frozen=True)
class Rule:
    # expected shape; None in a position = any size there (e.g. 1 or num_kv_heads when not known)
    shape: Callable[[Dims], tuple[int | None, ...]]
    check: Callable[[str, torch.Tensor, Dims], str | None]  # -> problem text, or None when fine
    required: bool = False


# ---------------------------------------------------------------------------------------- value checks
def _where(name: str, idx: tuple[int, ...]) -> str:
    if not idx:
        return name
    parts = [f"layer {idx[0]}"] + ([f"rotation {idx[1]}"] if len(idx) > 1 and "rotation" in name else [])
    return f"{name} ({', '.join(parts)})"


def _nonfinite(name: str, t: torch.Tensor, lead: int) -> str | None:
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0][:lead])
        return f"{_where(name, idx)} contains NaN or inf"
    return None


def check_orthogonal(name: str, r: torch.Tensor, dims: Dims | None = None, tol: float = ORTHO_TOL) -> str | None:
    """r [..., d, d]: finite and max |R R^T - I| <= tol for every matrix (NaN counts as a failure)."""
    p = _nonfinite(name, r, r.ndim - 2)
    if p:
        return p
    r64 = r.double()
    eye = torch.eye(r.shape[-1], dtype=torch.float64)
    err = (r64 @ r64.transpose(-1, -2) - eye).abs().amax(dim=(-1, -2))  # [...]
    bad = ~(err <= tol)
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0])
        return f"{_where(name, idx)} is not orthogonal (max |R R^T - I| = {float(err[idx]):.3g} > {tol:g})"
    return None


def check_finite(name: str, t: torch.Tensor, dims: Dims | None = None) -> str | None:
    return _nonfinite(name, t, 1)


def check_clip(name: str, t: torch.Tensor, dims: Dims | None = None) -> str | None:
    p = _nonfinite(name, t, 1)
    if p:
        return p
    bad = ~(((t > 0) & (t <= 1)) | (t == 0))
    if bool(bad.any()):
        i = int(bad.nonzero()[0][0])
        return f"{name} (layer {i}) is {float(t[i]):g}; clip ratios must be in (0, 1] (0 = no clipping)"
    return None


def check_levels(name: str, t: torch.Tensor, dims: Dims) -> str | None:
    p = _nonfinite(name, t, 1)
    if p:
        return p
    top = dims.n_levels - 1
    unsorted = (t[:, 1:] < t[:, :-1]).any(dim=1)
    if bool(unsorted.any()):
        i = int(unsorted.nonzero()[0][0])
        return f"{name} (layer {i}) are not sorted ascending: {[round(float(x), 4) for x in t[i]]}"
    out = ((t < -LEVEL_TOL) | (t > top + LEVEL_TOL)).any(dim=1)
    if bool(out.any()):
        i = int(out.nonzero()[0][0])
        return f"{name} (layer {i}) leave the code range [0, {top}]: {[round(float(x), 4) for x in t[i]]}"
    return None


def check_query_pair(name: str, q: torch.Tensor, dims: Dims, k_rotation: torch.Tensor, tol: float = ORTHO_TOL) -> str | None:
    """Queries' transform Q for keys stored as k @ M: scores need Q M^T = I (checked per layer/rotation)."""
    p = _nonfinite(name, q, q.ndim - 2) or _nonfinite("k_rotation", k_rotation, k_rotation.ndim - 2)
    if p:
        return p
    eye = torch.eye(q.shape[-1], dtype=torch.float64)
    err = (q.double() @ k_rotation.double().transpose(-1, -2) - eye).abs().amax(dim=(-1, -2))
    bad = ~(err <= tol)
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0])
        return (f"{name} (layer {idx[0]}) does not invert k_rotation (max |Q M^T - I| = {float(err[idx]):.3g} > {tol:g}): "
                "query and key scores would not match")
    return None


def check_scale_top(name: str, t: torch.Tensor, dims: Dims | None = None) -> str | None:
    from ..quant.format import LOG8_TOP_RANGE

    p = _nonfinite(name, t, 1)
    if p:
        return p
    lo, hi = LOG8_TOP_RANGE
    bad = (t != t.round()) | (t < lo) | (t > hi)
    if bool(bad.any()):
        i = int(bad.nonzero()[0][0])
        return f"{name} (layer {i}) is {float(t[i]):g}; log8 scale tops are integers in [{lo}, {hi}]"
    return None


RULES: dict[str, Rule] = {
    "k_rotation": Rule(lambda d: (d.layers, d.rk, d.head_dim, d.head_dim), check_orthogonal, required=True),
    "v_rotation": Rule(lambda d: (d.layers, d.rv, d.head_dim, d.head_dim), check_orthogonal, required=True),
    "k_eigenvalues": Rule(lambda d: (d.layers, d.rk, d.head_dim), check_finite),
    "v_eigenvalues": Rule(lambda d: (d.layers, d.rv, d.head_dim), check_finite),
    "k_clip": Rule(lambda d: (d.layers,), check_clip),
    "v_clip": Rule(lambda d: (d.layers,), check_clip),
    "k_levels": Rule(lambda d: (d.layers, d.n_levels), check_levels),
    "v_levels": Rule(lambda d: (d.layers, d.n_levels), check_levels),
    "k_mean": Rule(lambda d: (d.layers, None, d.head_dim), check_finite),
    "v_mean": Rule(lambda d: (d.layers, None, d.head_dim), check_finite),
    "k_query_rotation": Rule(lambda d: (d.layers, d.rk, d.head_dim, d.head_dim), check_query_pair),
    "k_scale_top": Rule(lambda d: (d.layers,), check_scale_top),
    "v_scale_top": Rule(lambda d: (d.layers,), check_scale_top),
}


# tensors that exist for K and V together: with only one half the cache would clip / use levels for /
# center one of K and V and silently not the other
PAIRS = (("k_clip", "v_clip"), ("k_levels", "v_levels"), ("k_mean", "v_mean"), ("k_scale_top", "v_scale_top"))


def _int_meta(meta: dict, key: str):
    v = meta.get(key)
    if v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        raise RotationFileError(f"metadata {key}={v!r} is not an integer") from None


def dims_of(rs) -> Dims:
    k, v = rs.k_rotation, rs.v_rotation
    bits = _int_meta(rs.meta, "bits") or 2
    if bits not in (2, 4):
        raise RotationFileError(f"metadata bits={bits} is not supported (2 or 4)")
    return Dims(layers=k.shape[0], rk=k.shape[1], rv=v.shape[1], head_dim=k.shape[-1], n_levels=2**bits,
                kv_heads=_int_meta(rs.meta, "num_kv_heads"))


def problems(rs, tol: float = ORTHO_TOL) -> list[str]:
    """Every rule ``rs`` breaks (empty list = valid). Shapes first, then values."""
    out = []
    d = dims_of(rs)
    if rs.v_rotation.shape[-1] != d.head_dim:
        out.append(f"v_rotation is {rs.v_rotation.shape[-1]}x{rs.v_rotation.shape[-1]}, k_rotation {d.head_dim}x{d.head_dim}")
    for key, want in (("num_layers", d.layers), ("head_dim", d.head_dim)):
        got = _int_meta(rs.meta, key)
        if got is not None and got != want:
            out.append(f"metadata {key}={got} but the rotations have {want}")
    nkv = _int_meta(rs.meta, "num_kv_heads")
    for name, r in (("k_rotation", d.rk), ("v_rotation", d.rv)):
        if nkv is not None and r not in (1, nkv):
            out.append(f"{name} has {r} rotations per layer; metadata says {nkv} KV heads (expected 1 or {nkv})")
    g = _int_meta(rs.meta, "group_size")
    if g is not None and g <= 0:
        out.append(f"metadata group_size={g} must be positive")
    for k_name, v_name in PAIRS:  # one half alone would silently treat K and V differently
        has_k, has_v = getattr(rs, k_name, None) is not None, getattr(rs, v_name, None) is not None
        if has_k != has_v:
            missing, present = (v_name, k_name) if has_k else (k_name, v_name)
            out.append(f"{missing} is missing while {present} is present")
    if out:
        return out
    paired = getattr(rs, "k_query_rotation", None) is not None  # then k_rotation = S.R, not orthogonal
    for name, rule in RULES.items():
        t = getattr(rs, name, None)
        if t is None:
            if rule.required:
                out.append(f"{name} is missing")
            continue
        if not isinstance(t, torch.Tensor):
            out.append(f"{name} is a {type(t).__name__}, not a tensor")
            continue
        if not t.is_floating_point():
            out.append(f"{name} has dtype {t.dtype}; expected a float tensor")
            continue
        want = rule.shape(d)
        if t.ndim != len(want) or any(w is not None and w != n for w, n in zip(want, t.shape)):
            shown = tuple("*" if w is None else w for w in want)
            out.append(f"{name} has shape {tuple(t.shape)}, expected {shown}".replace("'*'", "*"))
            continue
        if name == "k_rotation" and paired:
            p = check_finite(name, t, d)
        elif rule.check is check_orthogonal:
            p = check_orthogonal(name, t, d, tol)
        elif rule.check is check_query_pair:
            p = check_query_pair(name, t, d, rs.k_rotation, tol)
        else:
            p = rule.check(name, t, d)
        if p:
            out.append(p)
        if name.endswith("_mean") and d.kv_heads is not None and t.shape[1] not in (1, d.kv_heads):
            out.append(f"{name} has {t.shape[1]} heads; metadata says {d.kv_heads} KV heads (expected 1 or {d.kv_heads})")
    return out


def validate_rotation_set(rs, source: str | None = None, tol: float = ORTHO_TOL) -> None:
    """Raise ``RotationFileError`` (one line: what is wrong, where, and the fix) unless ``rs`` is usable."""
    found = problems(rs, tol)
    if found:
        where = f"{source}: " if source else "rotation set: "
        more = f" (and {len(found) - 1} more problem{'s' if len(found) > 2 else ''})" if len(found) > 1 else ""
        raise RotationFileError(f"{where}{found[0]}{more}; the rotations are unusable, {FIX}")
