"""Rotation files: one safetensors file with K and V rotations for every layer plus metadata.

Tensors (float32):
    k_rotation, v_rotation        [num_layers, R, head_dim, head_dim]   R = 1 (one per layer, shared by
                                                                        KV heads, the paper's recipe) or
                                                                        num_kv_heads (per-head option)
    k_eigenvalues, v_eigenvalues  [num_layers, R, head_dim]  eigenvalues of Sigma_K / Sigma_V, ascending
    k_clip, v_clip                [num_layers]  clip ratio rho per layer (0 = no clipping)
    k_levels, v_levels            [num_layers, 2**bits]  optional Lloyd-Max levels in code units
    k_mean, v_mean                [num_layers, num_kv_heads, head_dim]  optional (format 2): calibrated
                                  mean of post-RoPE keys / values per KV head, for exact centering
                                  (rotation/centering.py); metadata "centered" says whether the clip
                                  ratios, levels and V rotation were fitted on centered rows
    k_query_rotation              [num_layers, R, head_dim, head_dim]  optional (format 2): when the key
                                  transform M = S.R is not orthogonal (per-channel key rescale S, issue 10),
                                  queries use M^-T = S^-1.R: (q M^-T).(k M) = q.k; absent = k_rotation
    k_scale_top, v_scale_top      [num_layers]  optional: the integer T of the log8 scale format per layer
                                  (QuantConfig.scale_top; calibrated from the clipped, rotated sample rows)

Metadata (safetensors string map, JSON-encoded values): model_id, config_hash, num_layers,
num_kv_heads, head_dim, group_size, bits, calib_tokens, composition, objective, library_version.
The file is written to a temporary name in the same directory and renamed, so a crash never leaves
a half-written file in place of a good one.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import __version__
from ..errors import InputError, NotFoundError
from ..fileio import atomic_write
from ..dims import attention_dims, text_config

FORMAT = "oscar-kv-rotations/2"  # /2 adds the optional k_mean / v_mean tensors
FORMATS_READ = ("oscar-kv-rotations/1", FORMAT)  # version 1 files (no means) still load


class RotationMismatchError(InputError):
    """A rotation file does not belong to the model it is being used with."""


def config_fingerprint(config) -> dict:
    """The parts of a transformers config that a rotation depends on."""
    text = text_config(config)
    dims = attention_dims(text)
    fp = {
        "model_type": getattr(text, "model_type", "unknown"),
        "num_layers": dims.num_layers,
        "num_attention_heads": dims.num_heads,
        "num_kv_heads": dims.num_kv_heads,
        "head_dim": dims.head_dim,
        "hidden_size": int(text.hidden_size),
        "vocab_size": int(getattr(text, "vocab_size", 0) or 0),
    }
    return fp


def config_hash(config) -> str:
    blob = json.dumps(config_fingerprint(config), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass
class RotationSet:
    k_rotation: torch.Tensor  # [L, R, d, d]
    v_rotation: torch.Tensor  # [L, R, d, d]
    k_eigenvalues: torch.Tensor | None = None  # [L, R, d]
    v_eigenvalues: torch.Tensor | None = None
    k_clip: torch.Tensor | None = None  # [L]
    v_clip: torch.Tensor | None = None
    k_levels: torch.Tensor | None = None  # [L, 2**bits]
    v_levels: torch.Tensor | None = None
    k_mean: torch.Tensor | None = None  # [L, H_kv, d]
    k_query_rotation: torch.Tensor | None = None  # [L, R, d, d]; None = k_rotation (orthogonal)
    v_mean: torch.Tensor | None = None
    k_scale_top: torch.Tensor | None = None  # [L] integers (as float32): QuantConfig.scale_top of log8
    v_scale_top: torch.Tensor | None = None
    meta: dict = field(default_factory=dict)
    _valid_for: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        for name in ("k_rotation", "v_rotation"):
            t = getattr(self, name)
            if not isinstance(t, torch.Tensor):
                raise InputError(f"{name} must be a torch.Tensor [num_layers, R, d, d], got {type(t).__name__}")
            if t.ndim == 3:  # [L, d, d] -> one rotation per layer
                t = t[:, None]
            if t.ndim != 4 or t.shape[-1] != t.shape[-2]:
                raise InputError(f"{name} must be [num_layers, R, d, d], got {tuple(t.shape)}")
            setattr(self, name, t.float().contiguous())
        if self.k_rotation.shape[0] != self.v_rotation.shape[0]:
            raise InputError("k_rotation and v_rotation cover a different number of layers")

    @property
    def num_layers(self) -> int:
        return self.k_rotation.shape[0]

    @property
    def head_dim(self) -> int:
        return self.k_rotation.shape[-1]

    def rotation(self, kind: str, layer: int) -> torch.Tensor:
        """[R, d, d] rotation for ``kind`` in {"k", "v"} at ``layer``."""
        return (self.k_rotation if kind == "k" else self.v_rotation)[layer]

    def clip(self, kind: str, layer: int) -> float | None:
        t = self.k_clip if kind == "k" else self.v_clip
        if t is None:
            return None
        r = float(t[layer])
        return r if 0.0 < r < 1.0 else None

    def query_rotation(self, layer: int) -> torch.Tensor | None:
        """[R, d, d] transform for queries (and for reading stored keys back: x @ Q^T = x @ M^-1) when the
        key transform is not orthogonal; None when it is (then R_K serves both)."""
        return None if self.k_query_rotation is None else self.k_query_rotation[layer]

    def mean(self, kind: str, layer: int) -> torch.Tensor | None:
        """[H_kv, d] calibrated mean of ``kind`` in {"k", "v"} at ``layer`` (None in version-1 files)."""
        t = self.k_mean if kind == "k" else self.v_mean
        return None if t is None else t[layer]

    @property
    def centered(self) -> bool:
        """True when clip ratios / levels / R_V were fitted for centered rows (``calibrate(center=True)``)."""
        return bool(self.meta.get("centered", False)) and self.k_mean is not None

    def scale_top(self, kind: str, layer: int) -> int | None:
        """The log8 format's scale_top of ``kind`` at ``layer`` (None in files calibrated before it existed)."""
        t = self.k_scale_top if kind == "k" else self.v_scale_top
        return None if t is None else int(t[layer])

    def levels(self, kind: str, layer: int) -> tuple[float, ...] | None:
        t = self.k_levels if kind == "k" else self.v_levels
        return None if t is None else tuple(float(x) for x in t[layer])

    # ------------------------------------------------------------------ checks
    def validate(self, source: str | None = None) -> None:
        """Refuse (``RotationFileError``, one line) rotations that are not finite and orthogonal, clip
        ratios outside (0, 1], unsorted levels, inconsistent shapes: the rules of ``rotation/checks.py``.
        Re-checked only when a tensor was replaced or modified in place since the last check."""
        from .checks import validate_rotation_set

        key = tuple((id(t), t.data_ptr(), t._version) if isinstance(t, torch.Tensor) else id(t)
                    for t in (getattr(self, n) for n in self.__dataclass_fields__ if n not in ("meta", "_valid_for")))
        if self._valid_for == key:
            return
        validate_rotation_set(self, source)
        self._valid_for = key

    def check_model(self, config, group_size: int | None = None) -> None:
        """Refuse a rotation that is invalid (``validate``) or was made for a different model (clear
        message, no traceback soup)."""
        self.validate()
        fp = config_fingerprint(config)
        problems = []
        if self.num_layers != fp["num_layers"]:
            problems.append(f"{self.num_layers} layers in the file, {fp['num_layers']} in the model")
        if self.head_dim != fp["head_dim"]:
            problems.append(f"head_dim {self.head_dim} in the file, {fp['head_dim']} in the model")
        for kind, rot in (("K", self.k_rotation), ("V", self.v_rotation)):
            r = rot.shape[1]
            if r not in (1, fp["num_kv_heads"]):
                problems.append(f"{r} {kind} rotations per layer in the file, model has {fp['num_kv_heads']} KV heads")
        q = self.k_query_rotation
        if q is not None and q.shape != self.k_rotation.shape:
            problems.append(f"k_query_rotation is {tuple(q.shape)}, k_rotation {tuple(self.k_rotation.shape)}")
        for name in ("k_mean", "v_mean"):
            t = getattr(self, name)
            if t is not None and (t.ndim != 3 or t.shape[0] != self.num_layers or t.shape[1] not in (1, fp["num_kv_heads"])
                                  or t.shape[2] != self.head_dim):
                problems.append(f"{name} is {tuple(t.shape)}, want [{self.num_layers}, {fp['num_kv_heads']}, {self.head_dim}]")
        want = self.meta.get("config_hash")
        if want and want != config_hash(config) and not problems:
            problems.append(
                f"config hash {want} in the file, {config_hash(config)} for the model "
                f"(file made for {self.meta.get('model_id', '?')})"
            )
        if problems:
            raise RotationMismatchError(
                "rotation file does not match this model: " + "; ".join(problems)
                + ". Calibrate rotations for this model with `oscar-kv calibrate --model ...`."
            )

    # ------------------------------------------------------------------ io
    def save(self, path: str | os.PathLike) -> Path:
        from safetensors.torch import save_file

        path = Path(path)
        tensors = {"k_rotation": self.k_rotation, "v_rotation": self.v_rotation}
        for name in ("k_eigenvalues", "v_eigenvalues", "k_clip", "v_clip", "k_levels", "v_levels", "k_mean", "v_mean",
                     "k_query_rotation", "k_scale_top", "v_scale_top"):
            t = getattr(self, name)
            if t is not None:
                tensors[name] = t.float().contiguous()
        meta = {**self.meta, "format": FORMAT, "library_version": __version__}
        meta_str = {k: json.dumps(v) for k, v in meta.items()}
        # clone: K and V may be the same tensor (e.g. Hadamard for both), which safetensors refuses
        data = {k: v.detach().clone().contiguous() for k, v in tensors.items()}
        atomic_write(path, lambda tmp: save_file(data, tmp, metadata=meta_str))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, config=None) -> "RotationSet":
        from safetensors import safe_open

        path = Path(path)
        if not path.exists():
            raise NotFoundError(f"rotation file {path} does not exist; create it with `oscar-kv calibrate`")
        if path.is_dir():
            raise InputError(f"rotation file {path} is a directory; pass the .safetensors file")
        try:
            with safe_open(str(path), framework="pt") as f:
                raw_meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        except Exception as e:  # safetensors raises its own error types for corrupt headers
            raise InputError(f"{path} is not a readable safetensors rotation file ({e})") from None
        meta = {}
        for k, v in raw_meta.items():
            try:
                meta[k] = json.loads(v)
            except json.JSONDecodeError:
                meta[k] = v
        if meta.get("format") not in FORMATS_READ:
            raise InputError(
                f"{path} is not an oscar-kv rotation file (format {meta.get('format')!r}); "
                "for the authors' per-layer .pt files use `oscarkv.rotation.import_rotationzoo`"
            )
        missing = {"k_rotation", "v_rotation"} - tensors.keys()
        if missing:
            raise InputError(f"{path} lacks tensors {sorted(missing)}")
        fields = {k: v for k, v in tensors.items() if k in cls.__dataclass_fields__ and k != "_valid_for"}
        rs = cls(meta=meta, **fields)
        rs.validate(source=str(path))  # finite, orthogonal, clip in (0, 1], sorted levels, shapes
        if config is not None:
            rs.check_model(config)
        return rs
