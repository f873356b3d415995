"""The paged decode step as an opaque torch custom op, so ``torch.compile`` can take the rest of the model.

``torch.compile`` of a decode step (``graph.GraphDecoder(model, cache, compile=True)``) fuses the
model's many small ops (RMSNorm, q/k norm, RoPE, SiLU, residual adds, dtype casts, our rotations) into
a few Triton kernels. What it must not trace is the cache's storage work: host-side block planning,
ctypes launches of the CUDA kernels, Triton kernels with their own launch logic. That work is one op,
``oscarkv::paged_decode(q, k, v, handle, layer, scale, rotation) -> out``:

* q ``[B, Hq, d]`` rotated by R_K, k / v ``[B, Hkv, d]`` rotated (and centered) new rows; or, with
  ``rotation`` (R_K, float32 ``[1 or Hkv, d, d]``), q and k not yet rotated: the append rotates both
  (``write_kv(..., rotation=)``, inside the CUDA append kernel);
* ``handle``: a CPU int64 scalar naming the ``PagedState`` (``register``); a tensor, not an int, so
  that the compiled code does not specialise on it and one compilation serves every cache of the same
  shapes; ``layer``: the layer index;
* it appends k / v with ``write_kv`` (page demotion included) and returns ``decode_attention`` over
  the pools (``PagedState.decode_layer``, the same function the eager path calls).

The op declares no mutated arguments: what it writes (the pools) is not an input of the traced graph,
and its output feeds the next layer, so the compiled graph keeps the layers' order. Its fake
(meta) implementation returns an empty ``[B, Hq, d]`` tensor like q.
"""

from __future__ import annotations

import itertools
import weakref

import torch

from ..errors import StateError

_STATES: dict[int, weakref.ref] = {}
_NEXT = itertools.count(1)


def register(state) -> torch.Tensor:
    """A handle (CPU int64 scalar) for ``state``, valid while the state lives."""
    for k in [k for k, r in _STATES.items() if r() is None]:
        del _STATES[k]
    i = next(_NEXT)
    _STATES[i] = weakref.ref(state)
    return torch.tensor(i, dtype=torch.int64)


def lookup(handle: torch.Tensor):
    st = _STATES.get(int(handle))
    st = st() if st is not None else None
    if st is None:
        raise StateError("oscarkv::paged_decode got the handle of a paged OscarCache that no longer exists")
    return st


@torch.library.custom_op("oscarkv::paged_decode", mutates_args=())
def paged_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, handle: torch.Tensor, layer: int,
                 scale: float, rotation: torch.Tensor | None = None) -> torch.Tensor:
    """Append one K/V row per sequence to ``layer``'s pools and attend (see the module docstring)."""
    return lookup(handle).decode_layer(layer, q, k, v, scale, rotation)


@paged_decode.register_fake
def _paged_decode_fake(q, k, v, handle, layer, scale, rotation=None):
    return torch.empty_like(q, memory_format=torch.contiguous_format)
