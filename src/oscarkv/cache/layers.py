"""One cache layer class per kind of KV storage (transformers ``CacheLayerMixin`` style).

    FullPrecisionLayer   bf16 method: keys/values kept as given (same as DynamicLayer)
    TokenwiseLayer       naive / hadamard / int4 / oscar: rows rotated, then INT2/INT4 per token
    KiviLayer            kivi: keys per channel over blocks of ``group_size`` tokens, values per token

The two quantized kinds share ``MixedWindowLayer``: a model-dtype sink, a packed history and a
model-dtype tail (recent window plus the partial demotion page / KIVI's incomplete key block). All three segments hold *rotated*
rows (x @ R_K, v @ R_V), as in the spec (section 4), so one rotated query serves every segment.
With a centered plan (``plan.k_mean``) every segment holds (x - mean) @ R (rotation/centering.py):
exact, since the key shift is common to all keys and the value mean is added back on read.

``update(k, v)`` contract (shared by all kinds):
  * k, v: [B, H_kv, T, d] in the model's basis (post-RoPE keys).
  * The T new tokens are stored (sink first, then tail; whole pages of the tail that the window rule
    ``KVMethod.int2_len`` quantizes are demoted to the packed history) *before* anything is returned, so the returned old content already
    reflects the demotions caused by this call.
  * Returns ``cat(stored view of the tokens held before this call, the T new tokens unquantized)``
    along the token axis: in the original basis by default, in the rotated basis when
    ``rotated_outputs`` is set (OSCAR attention, see ``oscarkv.integrations.transformers``).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import CacheLayerMixin

from ..methods import KVMethod, LayerPlan
from ..quant import fake_quantize
from ..rotation import rotate, unrotate
from ..rotation.centering import center, uncenter
from .store import RowStore
from ..errors import InputError, StateError, UnsupportedError


def _nbytes(*ts: torch.Tensor | None) -> int:
    return sum(t.numel() * t.element_size() for t in ts if t is not None)


class _BatchOpsMixin:
    """Batch reordering for beam search / generate's batch expansion, through one ``_map_batch``."""

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        if self.is_initialized:
            idx = beam_idx.to(self.device)
            self._map_batch(lambda t: t.index_select(0, idx))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self._map_batch(lambda t: t[indices.to(self.device) if torch.is_tensor(indices) else indices])

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._map_batch(lambda t: t.repeat_interleave(repeats, dim=0))

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove != 0:
            raise UnsupportedError(
                f"{type(self).__name__} cannot be cropped (demoted tokens are not kept in full precision); "
                "assisted/speculative decoding is not supported with this cache"
            )


class FullPrecisionLayer(_BatchOpsMixin, CacheLayerMixin):
    """The ``bf16`` method: K/V stored unchanged in the model dtype (reference for the others)."""

    is_sliding = False
    supports_early_init = False

    def __init__(self):
        super().__init__()
        self.rotated_outputs = False  # no rotation: both bases are the same
        self.fresh = False  # set by update, consumed by the OSCAR attention function

    def lazy_initialization(self, key_states, value_states) -> None:
        self.device, self.dtype = key_states.device, key_states.dtype
        self.batch_size = key_states.shape[0]
        self.keys = key_states[:, :, :0]
        self.values = value_states[:, :, :0]
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys = torch.cat([self.keys, key_states], dim=-2)
        self.values = torch.cat([self.values, value_states], dim=-2)
        self.fresh = self.rotated_outputs
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.keys.shape[-2] if self.is_initialized else 0

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def get_max_length(self) -> int:
        return -1

    def reset(self) -> None:
        self.keys = self.values = None
        self.is_initialized = False

    def _map_batch(self, fn) -> None:
        self.keys, self.values = fn(self.keys), fn(self.values)
        self.batch_size = self.keys.shape[0]

    def segments(self) -> dict:
        n = self.get_seq_length()
        return {"sink": 0, "quantized": 0, "residual": 0, "recent": n, "total": n}

    def nbytes(self, allocated: bool = False) -> dict:
        return {"sink": 0, "quantized": 0, "window": _nbytes(self.keys, self.values)}


class MixedWindowLayer(_BatchOpsMixin, CacheLayerMixin):
    """sink | packed history | tail, all in the rotated basis. Subclasses say how history is packed.

    Which tokens are quantized comes from the method's window rule (``KVMethod.int2_len``, TEAM
    decision 1), applied to each row in its own positions: row b with ``pad_b`` left-padding slots
    holds slot j quantized iff ``pad_b + sink <= j < pad_b + sink + int2_len(n - pad_b)`` (``hi_b``).
    Storage is shared by the batch: the sink region holds the first ``sink + max_pad`` slots, the
    packed history the slots below ``min_b hi_b`` past the sink region, the tail the rest. Slots a row
    must read quantized that the shared storage keeps exact (sink-region slots past the row's own sink;
    with a page B > 1 and unequal padding, up to B - 1 tail slots) are read quantize-dequantized, which
    gives the same values the history would hold, so each row sees exactly what it would see alone.
    """

    is_sliding = False
    supports_early_init = False

    def __init__(self, plan: LayerPlan, method: KVMethod):
        super().__init__()
        self.plan, self.method = plan, method
        self.sink, self.recent = method.sink, method.recent
        self.rotated_outputs = False
        self.fresh = False
        self.q8_mask: torch.Tensor | None = None  # "+q8": the quantized slots of update's keys (quantized_slots)
        self.pad: torch.Tensor | None = None  # [B] left-pad counts; None = no padding
        self.n = 0

    # ------------------------------------------------------------------ storage
    def lazy_initialization(self, key_states, value_states) -> None:
        self.device, self.dtype = key_states.device, key_states.dtype
        self.batch_size = key_states.shape[0]
        if self.pad is None:
            self.pad = torch.zeros(self.batch_size, dtype=torch.long)
        if self.pad.shape[0] != self.batch_size:
            raise InputError(f"padding was set for batch {self.pad.shape[0]}, but the states have batch {self.batch_size}")
        self.pad = self.pad.to(self.device)
        self.sink_cap = self.sink + int(self.pad.max())
        # per row: sink-region slots below this are already as the row must read them
        self._sink_done = self.pad + self.sink
        self.k_rot = None if self.plan.k_rot is None else self.plan.k_rot.to(self.device)
        self.v_rot = None if self.plan.v_rot is None else self.plan.v_rot.to(self.device)
        self.k_mean = None if self.plan.k_mean is None else self.plan.k_mean.to(self.device)
        # reading keys back: x @ M^-1 = x @ (M^-T)^T (== k_rot^T when the key transform is orthogonal)
        self.k_unrot = None if self.plan.k_query_rot is None else self.plan.k_query_rot.to(self.device)
        self.v_mean = None if self.plan.v_mean is None else self.plan.v_mean.to(self.device)
        empty_k, empty_v = key_states[:, :, :0], value_states[:, :, :0]
        self.sink_k, self.sink_v, self.tail_k, self.tail_v = empty_k, empty_v, empty_k, empty_v
        self.hist_k, self.hist_v = RowStore(), RowStore()
        self.n = 0
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        if self.method.query == "int8" and not self.rotated_outputs:  # before anything is stored
            raise StateError(f"method {self.method.name!r} (+q8) scores the quantized history with an int8 query "
                             "inside the OSCAR attention function: call oscarkv.integrations.transformers."
                             "enable_oscar_attention(model, cache) first")
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n_old = self.n
        kr = rotate(center(key_states, self.k_mean), self.k_rot)
        vr = rotate(center(value_states, self.v_mean), self.v_rot)
        self._append(kr, vr)
        self.fresh = self.rotated_outputs
        self.q8_mask = None
        if n_old == 0:  # prefill into an empty cache: nothing older to show
            return (kr, vr) if self.rotated_outputs else (key_states, value_states)
        if self.method.query == "int8":
            self.q8_mask = self.quantized_slots(n_old, kr.shape[2])
        old_k, old_v = self._stored(n_old)
        if self.rotated_outputs:  # rotated *and* centered: the attention adds rotated_mean(v_mean) back
            return torch.cat([old_k, kr], dim=-2), torch.cat([old_v, vr], dim=-2)
        # the new tokens are returned exactly as given (not rotated back and forth)
        return (
            torch.cat([uncenter(unrotate(old_k, self.k_unrot), self.k_mean), key_states], dim=-2),
            torch.cat([uncenter(unrotate(old_v, self.v_rot), self.v_mean), value_states], dim=-2),
        )

    def quantized_slots(self, n_old: int, t_new: int) -> torch.Tensor:
        """[B, n_old + t_new] bool: the slots of the keys ``update`` returns that row b reads quantized (its own
        sink end <= slot < its quantized end, old tokens only: the new ones are returned as given). "+q8"
        scores these with the int8 query (``oscarkv.integrations.transformers``)."""
        j = torch.arange(n_old + t_new, device=self.device)[None, :]
        hi = torch.clamp(self._quantized_end(), max=n_old)[:, None]
        return (j >= (self.pad + self.sink)[:, None]) & (j < hi)

    def _quantized_end(self) -> torch.Tensor:
        """[B] slot where each row's quantized tokens end (``hi_b`` of the class docstring)."""
        return self.pad + self.sink + self.method.int2_len(self.n - self.pad)

    def _append(self, kr, vr) -> None:
        take = max(0, min(kr.shape[2], self.sink_cap - self.sink_k.shape[2]))
        if take:
            self.sink_k = torch.cat([self.sink_k, kr[:, :, :take]], dim=-2)
            self.sink_v = torch.cat([self.sink_v, vr[:, :, :take]], dim=-2)
        self.tail_k = torch.cat([self.tail_k, kr[:, :, take:]], dim=-2)
        self.tail_v = torch.cat([self.tail_v, vr[:, :, take:]], dim=-2)
        self.n += kr.shape[2]
        # Demotion follows the window rule with page B (spec section 4 demotes pages of 8 tokens; we
        # use B = 16 = the GPU block size by default, B = 1 demotes each token as it leaves the window).
        hi = self._quantized_end()
        m = max(0, int(hi.min()) - self.sink_cap - self.history_length())
        if m:  # demote the m oldest tail tokens (every row reads them quantized)
            self._push_history(self.tail_k[:, :, :m], self.tail_v[:, :, :m])
            self.tail_k, self.tail_v = self.tail_k[:, :, m:], self.tail_v[:, :, m:]
        self._quantize_sink_overflow(hi)

    def _fake_quant(self, seg_k, seg_v):
        return fake_quantize(seg_k, self.plan.k_cfg), fake_quantize(seg_v, self.plan.v_cfg)

    def _quantize_sink_overflow(self, hi: torch.Tensor) -> None:
        """Quantize-dequantize in place the sink-region slots past a row's own sink that the rule
        quantizes (only with left padding: the sink region is ``sink + max_pad`` slots)."""
        done = self._sink_done
        new = torch.clamp(hi, max=self.sink_k.shape[2])
        lo, up = int(done.min()), int(new.max())
        if up <= lo:
            return
        j = torch.arange(lo, up, device=self.device)
        need = ((j[None, :] >= done[:, None]) & (j[None, :] < new[:, None]))[:, None, :, None]  # [B, 1, m, 1]
        fk, fv = self._fake_quant(self.sink_k[:, :, lo:up], self.sink_v[:, :, lo:up])
        self.sink_k[:, :, lo:up] = torch.where(need, fk, self.sink_k[:, :, lo:up])
        self.sink_v[:, :, lo:up] = torch.where(need, fv, self.sink_v[:, :, lo:up])
        self._sink_done = torch.maximum(done, new)

    def _tail_view(self):
        """The tail as rows read it: with a page B > 1 and unequal padding a row's quantized tokens may
        reach up to B - 1 slots into the shared tail; those are read quantize-dequantized."""
        start = self.sink_cap + self.history_length()
        extra = torch.clamp(self._quantized_end() - start, min=0)
        e = min(int(extra.max()), self.tail_k.shape[2])
        if e <= 0:
            return self.tail_k, self.tail_v
        need = (torch.arange(e, device=self.device)[None, :] < extra[:, None])[:, None, :, None]
        fk, fv = self._fake_quant(self.tail_k[:, :, :e], self.tail_v[:, :, :e])
        k = torch.cat([torch.where(need, fk, self.tail_k[:, :, :e]), self.tail_k[:, :, e:]], dim=-2)
        v = torch.cat([torch.where(need, fv, self.tail_v[:, :, :e]), self.tail_v[:, :, e:]], dim=-2)
        return k, v

    def _stored(self, upto: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``upto`` tokens as held (history dequantized), rotated basis, model dtype."""
        hk, hv = self._history()
        tk, tv = self._tail_view()
        k = torch.cat([t for t in (self.sink_k, hk, tk) if t is not None], dim=-2)
        v = torch.cat([t for t in (self.sink_v, hv, tv) if t is not None], dim=-2)
        return k[:, :, :upto], v[:, :, :upto]

    # ------------------------------------------------------------------ per kind
    def _push_history(self, k, v) -> None:
        """Pack demoted rows (already in the stored basis); the plan says how (KIVI: key blocks)."""
        self.hist_k.append(self.plan.quantize_k(k))
        self.hist_v.append(self.plan.quantize_v(v))

    def _history(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        qk, qv = self.hist_k.view(), self.hist_v.view()
        if qk is None:
            return None, None
        return self.plan.dequantize_k(qk, self.dtype), self.plan.dequantize_v(qv, self.dtype)

    def history_length(self) -> int:
        return self.hist_v.length  # values are always one row per token

    # ------------------------------------------------------------------ Cache API
    def get_seq_length(self) -> int:
        return self.n

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.n + query_length, 0

    def get_max_length(self) -> int:
        return -1

    def reset(self) -> None:
        self.sink_k = self.sink_v = self.tail_k = self.tail_v = None
        self.hist_k = self.hist_v = None
        self.pad = None
        self.n = 0
        self.is_initialized = False

    def _map_batch(self, fn) -> None:
        for name in ("sink_k", "sink_v", "tail_k", "tail_v", "pad", "_sink_done"):
            setattr(self, name, fn(getattr(self, name)))
        self.hist_k.map_batch(fn)
        self.hist_v.map_batch(fn)
        self.batch_size = self.sink_k.shape[0]

    def segments(self) -> dict:
        """Token counts per segment (sink region includes left-padding slots)."""
        if not self.is_initialized:
            return {"sink": 0, "quantized": 0, "residual": 0, "recent": 0, "total": 0}
        tail = self.tail_k.shape[2]
        recent = min(tail, self.recent)
        return {
            "sink": self.sink_k.shape[2],
            "quantized": self.history_length(),
            "residual": tail - recent,  # the partial demotion page (KIVI: incomplete key block), 0 .. B-1
            "recent": recent,
            "total": self.n,
        }

    def nbytes(self, allocated: bool = False) -> dict:
        if not self.is_initialized:
            return {"sink": 0, "quantized": 0, "window": 0}
        return {
            "sink": _nbytes(self.sink_k, self.sink_v),
            "quantized": self.hist_k.nbytes(allocated) + self.hist_v.nbytes(allocated),
            "window": _nbytes(self.tail_k, self.tail_v),
        }


class TokenwiseLayer(MixedWindowLayer):
    """naive / hadamard / int4 / oscar: each demoted row is quantized on its own (token-local)."""


class KiviLayer(MixedWindowLayer):
    """KIVI-2. Keys: per channel over blocks of ``group_size`` tokens (aligned at the end of the sink);
    the tokens of the incomplete block stay in the full-precision tail as KIVI's residual. Values:
    per token, demoted together with their keys (simpler than KIVI's separate value residual)."""

    def lazy_initialization(self, key_states, value_states) -> None:
        super().lazy_initialization(key_states, value_states)
        if int(self.pad.max()) != int(self.pad.min()):
            # per-row block alignment would need per-row key blocks; equal padding is fine
            raise UnsupportedError("kivi does not support rows with different left padding; use batch size 1 or equal-length prompts")

