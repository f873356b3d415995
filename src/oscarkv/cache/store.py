"""Packed rows that grow along the token axis without re-copying the whole history every step."""

from __future__ import annotations

import torch

from ..quant import QuantizedRows


class RowStore:
    """Append-only ``QuantizedRows`` whose dim 2 is the token (or KIVI block) axis.

    ``torch.cat`` per decode step would copy the whole INT2 history each token (O(n^2) over a
    generation); instead the buffers double their capacity when full, so appends are amortised O(1).
    """

    def __init__(self):
        self._bufs: list[torch.Tensor] | None = None  # codes, scale, zero with spare capacity on dim 2
        self._head_dim = self._bits = 0
        self.length = 0

    @property
    def capacity(self) -> int:
        return 0 if self._bufs is None else self._bufs[0].shape[2]

    def append(self, q: QuantizedRows) -> None:
        parts = (q.codes, q.scale, q.zero)
        t = q.codes.shape[2]
        if t == 0:
            return
        if self._bufs is None:
            self._head_dim, self._bits = q.head_dim, q.bits
            self._bufs = [p.new_empty(*p.shape[:2], max(t, 16), *p.shape[3:]) for p in parts]
        elif self.length + t > self.capacity:
            cap = max(2 * self.capacity, self.length + t)
            grown = [b.new_empty(*b.shape[:2], cap, *b.shape[3:]) for b in self._bufs]
            for g, b in zip(grown, self._bufs):
                g[:, :, : self.length] = b[:, :, : self.length]
            self._bufs = grown
        for b, p in zip(self._bufs, parts):
            b[:, :, self.length : self.length + t] = p
        self.length += t

    def view(self) -> QuantizedRows | None:
        if self._bufs is None or self.length == 0:
            return None
        c, s, z = (b[:, :, : self.length] for b in self._bufs)
        return QuantizedRows(c, s, z, self._head_dim, self._bits)

    def nbytes(self, allocated: bool = False) -> int:
        if self._bufs is None:
            return 0
        n = self.capacity if allocated else self.length
        return sum(b[:, :, :n].numel() * b.element_size() for b in self._bufs)

    def map_batch(self, fn) -> None:
        """Apply ``fn`` (index_select / repeat_interleave on dim 0) to every buffer (beam search, batch ops)."""
        if self._bufs is not None:
            self._bufs = [fn(b) for b in self._bufs]
