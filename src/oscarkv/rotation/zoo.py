"""Import the authors' RotationZoo ``.pt`` files (spec section 1.4) into a ``RotationSet``.

One ``torch.save`` dict per target (K: ``k_rotation_qqt_r_h_pbr.pt``, V: ``v_rotation_sst_r_h_pbr.pt``):
``{"format_version": 1, "objective": str, "source_grouping": "layer",
   "layers": {int | str layer_id: {"rotation": [d, d], "eigenvalues": [d]}}}``.
The files carry no model id, head_dim or hash, so pass the model ``config`` to have them checked.
"""

from __future__ import annotations

import os

import torch

from .checks import FIX, RotationFileError, check_orthogonal
from ..dims import attention_dims
from .files import RotationSet, config_hash
from ..errors import InputError, NotFoundError

# Their objective suffixes name the composition with "r" for the eigenbasis; ours say "u".
_COMPOSITION = {"r_h_pbr": "u_h_pbr", "r_h": "u_h", "r": "u", "hadamard": "h"}


def _read(path, what: str, tol: float) -> tuple[torch.Tensor, torch.Tensor | None, str]:
    if not os.path.exists(path):
        raise NotFoundError(f"{what} rotation file {path} does not exist")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise InputError(f"{path} is not a readable torch file ({type(e).__name__}: {e})") from None
    if not isinstance(obj, dict) or "layers" not in obj:
        raise InputError(f"{path} is not a RotationZoo file: expected a dict with 'layers', got {type(obj).__name__}")
    if obj.get("format_version", 1) != 1:
        raise InputError(f"{path}: format_version {obj.get('format_version')!r} is not supported (only 1)")
    grouping = obj.get("source_grouping", "layer")
    if grouping != "layer":
        raise InputError(f"{path}: source_grouping {grouping!r} is not supported (only 'layer')")
    if not isinstance(obj["layers"], dict):
        raise InputError(f"{path}: 'layers' must be a dict {{layer id: {{'rotation': ..., 'eigenvalues': ...}}}}")
    try:
        layers = {int(k): v for k, v in obj["layers"].items()}
    except (TypeError, ValueError):
        raise InputError(f"{path}: layer ids must be integers, got {list(obj['layers'])[:5]}") from None
    if not layers:
        raise InputError(f"{path} holds no layers")
    if sorted(layers) != list(range(len(layers))):
        raise InputError(f"{path}: layer ids must be 0..{len(layers) - 1}, got {sorted(layers)[:10]}...")
    rots, eigs = [], []
    for i in range(len(layers)):
        entry = layers[i]
        r = entry.get("rotation") if isinstance(entry, dict) else None
        if not isinstance(r, torch.Tensor) or r.ndim != 2 or r.shape[0] != r.shape[1]:
            raise InputError(f"{path}: layer {i} rotation must be a square [d, d] tensor, got "
                             f"{tuple(r.shape) if isinstance(r, torch.Tensor) else type(r).__name__}")
        if rots and r.shape != rots[0].shape:
            raise InputError(f"{path}: layer {i} rotation is {tuple(r.shape)}, layer 0 is {tuple(rots[0].shape)}")
        if not r.is_floating_point():
            raise InputError(f"{path}: layer {i} rotation has dtype {r.dtype}; expected a float tensor")
        problem = check_orthogonal(f"layer {i} rotation", r, tol=tol)  # NaN fails too (not `err > tol`)
        if problem:
            raise RotationFileError(f"{path}: {problem}; these rotations are unusable, {FIX}")
        e = entry.get("eigenvalues")
        if e is not None and (not isinstance(e, torch.Tensor) or tuple(e.shape) != (r.shape[0],)):
            raise InputError(f"{path}: layer {i} eigenvalues have shape "
                             f"{tuple(getattr(e, 'shape', ())) or type(e).__name__}, expected ({r.shape[0]},)")
        rots.append(r.float())
        eigs.append(None if e is None else e.float())
    eig = torch.stack(eigs)[:, None] if all(e is not None for e in eigs) else None
    return torch.stack(rots)[:, None], eig, str(obj.get("objective", "unknown"))


def import_rotationzoo(k_path, v_path, config=None, k_clip: float | None = 0.96, v_clip: float | None = 0.92,
                       tol: float = 1e-3, model_id: str | None = None) -> RotationSet:
    """K and V RotationZoo files -> RotationSet with global clip ratios (None or 0 = no clipping).

    ``tol`` bounds max |RR^T - I| (their rotations are float32, a bf16 copy would need ~1e-2).
    With ``config`` (a transformers config) the set is checked against the model and stamped with its hash.
    """
    kr, ke, kobj = _read(k_path, "K", tol)
    vr, ve, vobj = _read(v_path, "V", tol)
    if kr.shape != vr.shape:
        raise InputError(f"K file has {kr.shape[0]} layers of {kr.shape[-1]}x{kr.shape[-1]}, "
                         f"V file has {vr.shape[0]} of {vr.shape[-1]}x{vr.shape[-1]}")
    n = kr.shape[0]
    comp = {_COMPOSITION.get(o.split("_", 1)[-1] if "_" in o else o, "unknown") for o in (kobj, vobj)}
    meta = {
        "model_id": model_id or "rotationzoo",
        "source": "rotationzoo",
        "num_layers": n,
        "head_dim": kr.shape[-1],
        "objective": f"k={kobj},v={vobj}",
        "composition": comp.pop() if len(comp) == 1 else "mixed",
        "clip": "default",
    }
    rs = RotationSet(
        k_rotation=kr, v_rotation=vr, k_eigenvalues=ke, v_eigenvalues=ve,
        k_clip=torch.full((n,), float(k_clip or 0.0)), v_clip=torch.full((n,), float(v_clip or 0.0)), meta=meta,
    )
    rs.validate(source=f"RotationZoo files {k_path}, {v_path}")  # clip ratios in (0, 1], finite eigenvalues
    if config is not None:
        rs.check_model(config)  # before stamping the hash, so a mismatch names layers/head_dim
        rs.meta["config_hash"] = config_hash(config)
        rs.meta["num_kv_heads"] = attention_dims(config).num_kv_heads
        if model_id is None:
            rs.meta["model_id"] = getattr(config, "name_or_path", "") or "rotationzoo"
    return rs
