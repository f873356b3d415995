"""Checks at the package's doors that several modules share (kept out of the modules they guard, so
they survive rewrites of those modules): what ``OscarCache`` accepts as a method and as rotations, and
all-or-nothing cache updates. Rotation-file rules live in ``rotation/checks.py``; file paths in
``fileio.py``; paged block tables and write plans in ``kernels/checks.py``.
"""

from __future__ import annotations

import dataclasses
import os

from .errors import InputError


# ------------------------------------------------------------------------------------------- methods
def resolve_method(method, **overrides):
    """A ``KVMethod`` from a name or a ``KVMethod``; keywords that are not None override its settings.

    Before, ``OscarCache(cfg, KVMethod(...), sink=0)`` silently kept the method's sink."""
    from .methods import METHOD_NAMES, KVMethod, make_method

    given = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(method, str):
        return make_method(method, **given)
    if isinstance(method, KVMethod):
        return dataclasses.replace(method, **given) if given else method
    raise InputError(f"method must be a name ({', '.join(METHOD_NAMES)}) or a KVMethod, got {type(method).__name__}")


def resolve_rotations(rotations, config=None):
    """None, a ``RotationSet``, or a path to a rotation file (loaded and checked against ``config``)."""
    from .rotation import RotationSet

    if rotations is None or isinstance(rotations, RotationSet):
        return rotations
    if isinstance(rotations, (str, os.PathLike)):
        return RotationSet.load(rotations, config)
    raise InputError(
        f"rotations must be a RotationSet or the path of a rotation file, got {type(rotations).__name__}; "
        "use rotations=RotationSet.load(PATH) or rotations=PATH"
    )


# ---------------------------------------------------------------------------------------- token ids
def check_token_ids(name: str, ids, vocab: int | None) -> None:
    """An integer tensor of token ids, each in [0, vocab) (one host sync; ``vocab=None``: the dtype only, no
    sync): an id past the vocabulary is an IndexError deep in the embedding on CPU and a device-side assert
    on CUDA; float ids were truncated."""
    import torch

    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise InputError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if vocab is not None and ids.numel():
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= vocab:
            raise InputError(f"{name} holds token id {lo if lo < 0 else hi}, outside the model's vocabulary [0, {vocab})")


# -------------------------------------------------------------------------------- all-or-nothing update
def check_update_args(k, v, layer_idx, num_layers: int, num_kv_heads: int, head_dim: int,
                      batch: int | None = None) -> None:
    """Shapes of a cache update, from Python ints only (no device sync on the decode path). ``batch``: the
    rows the layer already holds (None while it is empty)."""
    if not 0 <= layer_idx < num_layers:
        raise InputError(f"layer_idx {layer_idx} is out of range: the cache has {num_layers} layers; build the cache "
                         "from this model's config (OscarCache(model.config, ...)) and use a new one")
    if batch is not None and k.shape[0] != batch:
        raise InputError(f"the cache holds a batch of {batch} rows, this forward has {k.shape[0]}; "
                         "use a new OscarCache for another batch")
    want = (num_kv_heads, head_dim)
    for name, t in (("key_states", k), ("value_states", v)):
        if t.ndim != 4 or (t.shape[1], t.shape[3]) != want:
            raise InputError(f"{name} must be [batch, {num_kv_heads} KV heads, tokens, {head_dim}], got {tuple(t.shape)}; "
                             "build the cache from this model's config")
    if k.shape[:3] != v.shape[:3]:
        raise InputError(f"key_states {tuple(k.shape)} and value_states {tuple(v.shape)} differ in batch or tokens")


def snapshot_layer(layer):
    """Shallow state of a cache layer (its attributes, and one level into the package's own helper
    objects such as ``RowStore``), enough to undo an update that raised half-way. Tensors are not
    copied: the layers replace tensors rather than growing them in place (RowStore writes in place
    only past its valid length, which the restored length hides)."""
    if layer is None:
        return None
    state = dict(layer.__dict__)
    inner = {k: dict(v.__dict__) for k, v in state.items()
             if hasattr(v, "__dict__") and type(v).__module__.startswith("oscarkv.")}
    return state, inner


def restore_layer(layer, snap) -> None:
    if layer is None or snap is None:
        return
    state, inner = snap
    layer.__dict__.clear()
    layer.__dict__.update(state)
    for k, d in inner.items():
        obj = state[k]
        obj.__dict__.clear()
        obj.__dict__.update(d)
