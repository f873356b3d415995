"""Paged mixed-precision KV layout: pools, a block allocator and the per-sequence window bookkeeping.

Logical layout of one sequence of t tokens (spec section 4; page-wise demotion, TEAM decision 1), with
page B (default block_size) and n = int2_len(t) = B * floor(max(0, t - S - W) / B):

    [0, S)            BF16 sink             (hp pool, hp index = position)
    [S, S + n)        INT2 history          (int2 pool, int2 index = position - S)
    [S + n, t)        BF16 recent window    (hp pool, ring: hp index = S + (position - S) % R,
                                             R = W + B, or W when B = 1)

Sequences with t < S + W + B are entirely BF16. Everything is stored rotated (x @ R).

Pools (one layer; a model keeps one pool per layer and shares the block tables across layers). Both use
FlashInfer's "HND" page layout, so the ``block_size`` rows of one (block, head) are contiguous: a decode
kernel then streams 512 contiguous bytes of packed K per (16-token block, head) instead of 32-byte pieces.

    int2 pool   k_codes, v_codes   [num_int2_blocks, num_kv_heads, block_size, head_dim // 4]  uint8
                (``layout`` "logical": quartered rows as in oscarkv.quant; "tile16": the CUDA kernel's
                fragment order inside each (block, head), see layout.py, and the six INT2 tensors are
                views of one record per (block, head), see ``tile16_records``)
                k_scale, k_zero,   [num_int2_blocks, num_kv_heads, block_size, num_groups]     scale dtype
                v_scale, v_zero
    hp pool     k_hp, v_hp         [num_hp_blocks, num_kv_heads, block_size, head_dim]         bf16 / fp16

Addressing (vLLM / FlashInfer conventions, one table per tier):

    hp_block_tables   [batch, max_hp_blocks]   int32   hp block ids: sink, then ring from the oldest block
    hp_lens           [batch]                  int32   valid hp tokens = t - int2_len(t)
    int2_block_tables [batch, max_int2_blocks] int32   int2 block ids of the history, in order
    int2_lens         [batch]                  int32   int2 tokens = int2_len(t)
    slot = block_id * block_size + offset_in_block     (vLLM slot_mapping convention, per pool)

Departures from the spec, and why:
  * The spec keeps one flat slot space with per-token indirection (req_to_token) and demotes 8 tokens at
    a time into a fresh page. We use per-tier block tables (the vLLM/FlashInfer convention the issue asks
    for) and demote one whole page of B = block_size (16) tokens every B steps (spec: 8). The metadata
    lists the ring blocks starting at the oldest recent token's block, so the valid hp tokens are always
    a prefix of the hp table, which keeps the decode kernel's hp segment a plain (table, length) pair.
  * Attention over the cache is order-free (RoPE is applied before caching), so the ring does not need
    to be kept in position order.
  * Block 0 of each pool is reserved as the null block: block tables are padded with 0, so a padded
    entry can never point at another sequence's data.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import InputError, StateError, UnsupportedError
from ..quant import QuantConfig, clip_index, int2_len, storage_dtype
from .checks import SequenceError, check_append_request, check_known

NULL_BLOCK = 0
# the Triton decode kernel's dots run over head_dim / 4 codes (one 2-bit plane); Triton compiles a dot
# only with K >= 16 on a GPU (the interpreter has no such bound)
TRITON_GPU_MIN_HEAD_DIM = 64


class OutOfBlocksError(StateError):
    """Raised when an allocation would need more free blocks than the pool has."""


class BlockOwnershipError(StateError):
    """Raised when a sequence frees (or is handed) a block it does not own."""


class BlockAllocator:
    """Hands out block ids of one pool and tracks who owns each.

    Block 0 is never handed out (null block). ``allocate`` is all-or-nothing: it raises
    ``OutOfBlocksError`` before changing anything when fewer than ``n`` blocks are free.
    """

    def __init__(self, num_blocks: int, name: str = "pool"):
        if num_blocks < 2:
            raise InputError(f"{name}: need at least 2 blocks (block 0 is the reserved null block), got {num_blocks}")
        self.name = name
        self.num_blocks = num_blocks
        # Pop from the end: low ids are handed out first, which keeps small tests easy to read.
        self._free = list(range(num_blocks - 1, 0, -1))
        self._owner: dict[int, object] = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

    def owner(self, block: int):
        return self._owner.get(block)

    def allocate(self, n: int, owner) -> list[int]:
        if n < 0:
            raise InputError(f"cannot allocate {n} blocks")
        if n > len(self._free):
            raise OutOfBlocksError(
                f"{self.name}: asked for {n} blocks for sequence {owner!r} but only {len(self._free)} of "
                f"{self.num_blocks - 1} are free; free finished sequences or allocate a larger pool"
            )
        out = [self._free.pop() for _ in range(n)]
        for b in out:
            self._owner[b] = owner
        return out

    def free(self, blocks: list[int], owner) -> None:
        # Validate everything first so a bad call leaves the allocator unchanged.
        for b in blocks:
            if self._owner.get(b, None) is None:
                raise BlockOwnershipError(f"{self.name}: block {b} is not allocated (double free?)")
            if self._owner[b] != owner:
                raise BlockOwnershipError(
                    f"{self.name}: sequence {owner!r} tried to free block {b} owned by {self._owner[b]!r}"
                )
        if len(set(blocks)) != len(blocks):
            raise BlockOwnershipError(f"{self.name}: duplicate block ids in free({blocks})")
        for b in blocks:
            del self._owner[b]
            self._free.append(b)


@dataclass
class MixedKVPool:
    """Tensors of one layer's cache (shapes in the module docstring)."""

    k_codes: torch.Tensor
    k_scale: torch.Tensor
    k_zero: torch.Tensor
    v_codes: torch.Tensor
    v_scale: torch.Tensor
    v_zero: torch.Tensor
    k_hp: torch.Tensor
    v_hp: torch.Tensor
    k_cfg: QuantConfig
    v_cfg: QuantConfig
    # "logical" (oscarkv.quant rows) or "tile16" (the CUDA kernel's fragment order, see kernels/layout.py)
    layout: str = "logical"

    @property
    def block_size(self) -> int:
        return self.k_hp.shape[2]

    @property
    def num_kv_heads(self) -> int:
        return self.k_hp.shape[1]

    @property
    def head_dim(self) -> int:
        return self.k_hp.shape[3]

    @property
    def num_groups(self) -> int:
        return self.k_scale.shape[3]

    @classmethod
    def allocate(
        cls,
        num_int2_blocks: int,
        num_hp_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        k_cfg: QuantConfig | None = None,
        v_cfg: QuantConfig | None = None,
        dtype: torch.dtype = torch.bfloat16,
        device="cpu",
        layout: str = "logical",
    ) -> "MixedKVPool":
        """Zero-filled pools of one layer (a tile16 pool's INT2 tensors are views of one record tensor:
        ``tile16_records``)."""
        k_cfg = k_cfg or QuantConfig()
        v_cfg = v_cfg or QuantConfig()
        check_kernel_configs(k_cfg, v_cfg, head_dim)
        if layout not in ("logical", "tile16"):
            raise InputError(f"layout must be 'logical' or 'tile16', got {layout!r}")
        if layout == "tile16" and (block_size != 16 or k_cfg.group(head_dim) != head_dim):
            raise InputError("layout='tile16' needs block_size=16 and one scale group per row (group_size >= head_dim)")
        ng = head_dim // k_cfg.group(head_dim)
        sdt = storage_dtype(k_cfg.scale_dtype)
        qshape = (num_int2_blocks, num_kv_heads, block_size)
        # Zero-filled (not empty) so a stray read of an unused slot is harmless rather than NaN.
        z = lambda *s, dt: torch.zeros(*s, dtype=dt, device=device)  # noqa: E731
        if layout == "tile16":
            int2 = tile16_records(num_int2_blocks, num_kv_heads, head_dim, sdt, device)
        else:
            int2 = dict(k_codes=z(*qshape, head_dim // 4, dt=torch.uint8), k_scale=z(*qshape, ng, dt=sdt),
                        k_zero=z(*qshape, ng, dt=sdt), v_codes=z(*qshape, head_dim // 4, dt=torch.uint8),
                        v_scale=z(*qshape, ng, dt=sdt), v_zero=z(*qshape, ng, dt=sdt))
        return cls(
            **int2,
            k_hp=z(num_hp_blocks, num_kv_heads, block_size, head_dim, dt=dtype),
            v_hp=z(num_hp_blocks, num_kv_heads, block_size, head_dim, dt=dtype),
            k_cfg=k_cfg,
            v_cfg=v_cfg,
            layout=layout,
        )


TILE16_RECORD_FIELDS = ("k_codes", "v_codes", "k_scale", "k_zero", "v_scale", "v_zero")
POOL_TENSORS = TILE16_RECORD_FIELDS + ("k_hp", "v_hp")  # every tensor of a MixedKVPool


def tile16_record_offsets(head_dim: int, scale_bytes: int) -> tuple[dict, int]:
    """Byte offset of each INT2 tensor inside a tile16 record (one (block, KV head): 16 tokens), in the order
    of ``TILE16_RECORD_FIELDS``, and the record's size: K codes | V codes (4 d bytes each) | k_scale | k_zero
    | v_scale | v_zero (16 values each). The one home of this layout on the Python side (the CUDA kernel's
    shared-memory tile has the same order, ``TB`` in kernels/cuda/int2_paged.cu)."""
    sizes = (4 * head_dim, 4 * head_dim) + (16 * scale_bytes,) * 4
    offs, o = {}, 0
    for name, n in zip(TILE16_RECORD_FIELDS, sizes):
        offs[name] = o
        o += n
    return offs, o


def tile16_records(num_blocks: int, num_kv_heads: int, head_dim: int, scale_dtype: torch.dtype, device) -> dict:
    """The INT2 tensors of a tile16 pool (block_size 16, one scale group per row) as strided views of one
    zero-filled uint8 tensor ``[num_blocks, num_kv_heads, record]`` (``tile16_record_offsets``): per (block,
    KV head) one contiguous record in the order of the CUDA decode kernel's shared-memory tile, so a tile is
    one address and 9 consecutive 128-byte lines at d = 128 (issue 7). Shapes and dtypes are those of the
    logical layout; every consumer addresses the pool through strides."""
    sb = torch.tensor([], dtype=scale_dtype).element_size()
    size = tile16_record_offsets(head_dim, sb)[1]
    return tile16_views(torch.zeros(num_blocks, num_kv_heads, size, dtype=torch.uint8, device=device), head_dim,
                        scale_dtype)


def tile16_views(rec: torch.Tensor, head_dim: int, scale_dtype: torch.dtype) -> dict:
    """The six INT2 tensors of a tile16 pool over existing records ``rec`` ``[num_blocks, num_kv_heads,
    record]`` uint8 (``tile16_records``' memory, or a serving engine's pages: the vLLM backend)."""
    sb = torch.tensor([], dtype=scale_dtype).element_size()
    offs, size = tile16_record_offsets(head_dim, sb)
    if rec.dtype != torch.uint8 or rec.shape[-1] != size:
        raise ValueError(f"tile16 records of head_dim {head_dim} are {size} bytes, got {tuple(rec.shape)} {rec.dtype}")
    out = {}
    for name, o in offs.items():
        if name.endswith("codes"):
            out[name] = rec[..., o : o + 4 * head_dim].unflatten(-1, (16, head_dim // 4))
        else:
            out[name] = rec[..., o : o + 16 * sb].view(scale_dtype).unflatten(-1, (16, 1))
    return out


def check_kernel_configs(k_cfg: QuantConfig, v_cfg: QuantConfig, head_dim: int) -> None:
    """The kernels implement the default format only; say clearly what is not covered."""
    for name, c in (("K", k_cfg), ("V", v_cfg)):
        if c.bits != 2:
            raise UnsupportedError(f"{name}: the paged kernels store INT2 only (got bits={c.bits})")
        if c.levels is not None:
            raise UnsupportedError(f"{name}: non-uniform (Lloyd-Max) levels are not implemented in the kernels")
    if head_dim % 16 or head_dim & (head_dim - 1):
        raise InputError(f"head_dim must be a power of two >= 16, got {head_dim}")
    gk, gv = k_cfg.group(head_dim), v_cfg.group(head_dim)
    if gk != gv or k_cfg.scale_dtype != v_cfg.scale_dtype:
        raise UnsupportedError("K and V must share group_size and scale_dtype (clip ratios may differ)")
    # Each bit plane of the quartered packing covers head_dim/4 consecutive dims; the decode kernel
    # applies one (scale, zero) per plane, so a plane must not straddle two groups.
    if gk % (head_dim // 4):
        raise UnsupportedError(
            f"group_size {gk} must be a multiple of head_dim/4 = {head_dim // 4} for the decode kernel"
        )


@dataclass
class DecodeMeta:
    """Per-batch addressing passed to the attention kernels (shapes in the module docstring)."""

    hp_block_tables: torch.Tensor
    hp_lens: torch.Tensor
    int2_block_tables: torch.Tensor
    int2_lens: torch.Tensor
    # Host-side maxima (vLLM's max_seq_len idea): let the launcher size its split grid without a device
    # sync, which also keeps the call CUDA-graph capturable. None = read from the tensors.
    max_hp_len: int | None = None
    max_int2_len: int | None = None

    def to(self, device) -> "DecodeMeta":
        t = (self.hp_block_tables, self.hp_lens, self.int2_block_tables, self.int2_lens)
        return DecodeMeta(*(x.to(device) for x in t), self.max_hp_len, self.max_int2_len)



@dataclass
class WritePlan:
    """Write instructions for ``write_kv`` (int64 tensors, -1 = nothing to do).

    Row r of the new K/V (``[num_rows]`` arrays) goes to hp slot ``hp_slots[r]`` (copied) or to int2 slot
    ``int2_slots[r]`` (clipped + quantized). Before that, each BF16 row at hp slot ``demote_src[i]`` is
    quantized into int2 slot ``demote_dst[i]`` (``[num_demoted]``, rows leaving the recent window; page-wise
    demotion makes this 0 or a multiple of the page at each step). ``fusable`` is False when a new row's hp
    slot is a demotion source of the same call (chunks longer than the ring); then demotion runs first.

    Page view (set by ``MixedKVCache`` when the page is a multiple of block_size, used by the CUDA append
    kernel of the tile16 layout): every int2 block written by this call, ``page_dst [P]``, with the source
    of each of its rows ``page_src [P, block_size]``: ``>= 0`` an hp slot (demotion), ``< 0`` new row
    ``-(x + 1)``.

    On the GPU a plan's tensors must come from host copies (``to``, ``fill_page_view`` + upload), not from a
    kernel launched just before ``write_kv``: with programmatic dependent launch the CUDA append reads
    ``page_dst`` and ``hp_slots`` before it waits for the previous kernel.
    """

    hp_slots: torch.Tensor
    int2_slots: torch.Tensor
    demote_src: torch.Tensor
    demote_dst: torch.Tensor
    fusable: bool
    page_dst: torch.Tensor | None = None
    page_src: torch.Tensor | None = None

    def to(self, device) -> "WritePlan":
        mv = lambda t: None if t is None else t.to(device)  # noqa: E731
        return WritePlan(*(t.to(device) for t in (self.hp_slots, self.int2_slots, self.demote_src, self.demote_dst)),
                         self.fusable, mv(self.page_dst), mv(self.page_src))

    def fill_page_view(self, page_dst: torch.Tensor, page_src: torch.Tensor) -> None:
        """Write this plan's page view into fixed-size buffers ``page_dst [N]``, ``page_src [N, block_size]``
        (a graph-captured step's tables): its pages first, the rest padding, ``NULL_BLOCK`` with sources -1,
        which the CUDA append kernel skips (a padded page costs its CTAs a launch and one load, no quantization)."""
        n = 0 if self.page_dst is None else self.page_dst.shape[0]
        if n > page_dst.shape[0]:
            raise StateError(f"this step writes {n} int2 pages, the step's fixed page table holds "
                             f"{page_dst.shape[0]}; this should not happen (one page per row and step)")
        page_dst.fill_(NULL_BLOCK)
        page_src.fill_(-1)
        if n:
            page_dst[:n] = self.page_dst
            page_src[:n] = self.page_src

    def pad_pages(self, num_pages: int) -> "WritePlan":
        """This plan with its page view padded to ``num_pages`` pages (``fill_page_view``), on its device."""
        if self.page_src is None:
            raise InputError("pad_pages needs a plan with a page view (MixedKVCache page a multiple of block_size)")
        bs = self.page_src.shape[1]
        dst = torch.empty(num_pages, dtype=torch.int64, device=self.hp_slots.device)
        src = torch.empty(num_pages, bs, dtype=torch.int64, device=self.hp_slots.device)
        self.fill_page_view(dst, src)
        return WritePlan(self.hp_slots, self.int2_slots, self.demote_src, self.demote_dst, self.fusable, dst, src)


class _Seq:
    __slots__ = ("length", "hp_blocks", "int2_blocks")

    def __init__(self):
        self.length = 0
        self.hp_blocks: list[int] = []
        self.int2_blocks: list[int] = []


class MixedKVCache:
    """Bookkeeping for sink + INT2 history + recent ring over two block pools (no tensors held).

    Window rule (TEAM decision 1, page-wise demotion with page B): a sequence of t tokens holds
        int2_len(t) = B * floor(max(0, t - S - W) / B)       tokens [S, S + int2_len) in INT2
        sink [0, min(t, S)) and recent [S + int2_len, t) in the hp pool (W .. W + B - 1 recent tokens).
    B = 1 is the per-token rule (ring of W slots); otherwise B must be a multiple of block_size and the
    ring has W + B slots, so a demoted page is whole blocks of both pools. ``page`` defaults to
    block_size (the GPU rule). The hp block table lists the sink blocks, then the ring blocks starting at
    the block of the oldest recent token, so the valid hp tokens are always a prefix of the table.

    ``plan_append`` reserves blocks and returns the slot mappings for new tokens; ``metadata`` returns
    the block tables and lengths for attention. The tensors live in ``MixedKVPool`` (one per layer).
    """

    def __init__(self, num_int2_blocks: int, num_hp_blocks: int, block_size: int = 16, sink: int = 64,
                 recent: int = 256, page: int | None = None):
        page = block_size if page is None else page
        if sink % block_size or recent % block_size:
            raise InputError(f"sink ({sink}) and recent ({recent}) must be multiples of block_size ({block_size})")
        if recent <= 0:
            raise InputError("recent must be positive (the ring holds at least one block)")
        if page != 1 and (page <= 0 or page % block_size):
            raise InputError(f"page ({page}) must be 1 or a positive multiple of block_size ({block_size})")
        self.block_size, self.sink, self.recent, self.page = block_size, sink, recent, page
        self.ring = recent if page == 1 else recent + page
        self.int2_alloc = BlockAllocator(num_int2_blocks, "int2 pool")
        self.hp_alloc = BlockAllocator(num_hp_blocks, "hp pool")
        self._seqs: dict[object, _Seq] = {}

    # ---- sequence lifetime -------------------------------------------------------------------------
    def add(self, seq_id) -> None:
        if seq_id in self._seqs:
            raise SequenceError(f"sequence {seq_id!r} already exists")
        self._seqs[seq_id] = _Seq()

    def remove(self, seq_id) -> None:
        check_known(self, [seq_id])
        s = self._seqs.pop(seq_id)
        self.hp_alloc.free(s.hp_blocks, seq_id)
        self.int2_alloc.free(s.int2_blocks, seq_id)

    def length(self, seq_id) -> int:
        check_known(self, [seq_id])
        return self._seqs[seq_id].length

    def blocks(self, seq_id) -> tuple[list[int], list[int]]:
        check_known(self, [seq_id])
        s = self._seqs[seq_id]
        return list(s.hp_blocks), list(s.int2_blocks)

    # ---- position -> slot --------------------------------------------------------------------------
    def int2_len(self, t: int) -> int:
        return int2_len(t, self.sink, self.recent, self.page)

    def hp_len(self, t: int) -> int:
        return t - self.int2_len(t)

    def hp_index(self, pos: int) -> int:
        return pos if pos < self.sink else self.sink + (pos - self.sink) % self.ring

    def _hp_slots_used(self, t: int) -> int:
        return min(t, self.sink) + min(max(0, t - self.sink), self.ring)

    def _slot(self, blocks: list[int], idx: int) -> int:
        return blocks[idx // self.block_size] * self.block_size + idx % self.block_size

    # ---- writes ------------------------------------------------------------------------------------
    def plan_append(self, seq_ids: list, num_new: list[int]) -> WritePlan:
        """Reserve blocks for ``num_new[i]`` tokens of ``seq_ids[i]`` and return the row slot mappings.

        Rows are ordered sequence by sequence, positions ascending (the order of the K/V passed to
        ``write_kv``). All-or-nothing: on ``OutOfBlocksError`` no sequence changes.
        """
        check_append_request(self, seq_ids, num_new)  # known, unique, counts ints >= 0 (checks.py)
        bs = self.block_size
        need_hp = need_int2 = 0
        for sid, c in zip(seq_ids, num_new):
            s = self._seqs[sid]
            need_hp += max(0, -(-self._hp_slots_used(s.length + c) // bs) - len(s.hp_blocks))
            need_int2 += max(0, -(-self.int2_len(s.length + c) // bs) - len(s.int2_blocks))
        if need_hp > self.hp_alloc.num_free:
            self.hp_alloc.allocate(need_hp, seq_ids)  # raises with the standard message
        if need_int2 > self.int2_alloc.num_free:
            self.int2_alloc.allocate(need_int2, seq_ids)
        hp_slots, int2_slots, dsrc, ddst = [], [], [], []
        pages: dict[int, list[int]] = {}  # int2 block -> per-row source (hp slot, or -(row + 1))
        S = self.sink
        row = 0
        for sid, c in zip(seq_ids, num_new):
            s = self._seqs[sid]
            t0, t1 = s.length, s.length + c
            s.hp_blocks += self.hp_alloc.allocate(max(0, -(-self._hp_slots_used(t1) // bs) - len(s.hp_blocks)), sid)
            s.int2_blocks += self.int2_alloc.allocate(max(0, -(-self.int2_len(t1) // bs) - len(s.int2_blocks)), sid)
            i0, i1 = S + self.int2_len(t0), S + self.int2_len(t1)  # int2 region grows from [S, i0) to [S, i1)
            for p in range(max(i0, S), min(i1, t0)):  # were in the ring before this call: demote
                src, dst = self._slot(s.hp_blocks, self.hp_index(p)), self._slot(s.int2_blocks, p - S)
                dsrc.append(src)
                ddst.append(dst)
                pages.setdefault(dst // bs, [0] * bs)[dst % bs] = src
            for p in range(t0, t1):
                if S <= p < i1:
                    dst = self._slot(s.int2_blocks, p - S)
                    hp_slots.append(-1)
                    int2_slots.append(dst)
                    pages.setdefault(dst // bs, [0] * bs)[dst % bs] = -(row + 1)
                else:
                    hp_slots.append(self._slot(s.hp_blocks, self.hp_index(p)))
                    int2_slots.append(-1)
                row += 1
            s.length = t1
        fusable = not (set(dsrc) & set(hp_slots))
        mk = lambda x: torch.tensor(x, dtype=torch.int64)  # noqa: E731
        page_dst = page_src = None
        if self.page % bs == 0:  # whole blocks only (page 1 with block_size 1 included)
            page_dst = mk(list(pages.keys()))
            page_src = mk(list(pages.values())).reshape(len(pages), bs)
        return WritePlan(mk(hp_slots), mk(int2_slots), mk(dsrc), mk(ddst), fusable, page_dst, page_src)

    # ---- reads -------------------------------------------------------------------------------------
    def _hp_table(self, s: _Seq) -> list[int]:
        """Sink blocks, then ring blocks from the one holding the oldest recent token (valid hp = prefix)."""
        ns = self.sink // self.block_size
        sink, ring = s.hp_blocks[:ns], s.hp_blocks[ns:]
        if self.page == 1 or not ring or s.length <= self.sink:
            return sink + ring
        first = ((self.int2_len(s.length)) % self.ring) // self.block_size
        return sink + ring[first:] + ring[:first]

    def metadata(self, seq_ids: list, device="cpu") -> DecodeMeta:
        check_known(self, seq_ids)
        seqs = [self._seqs[s] for s in seq_ids]
        mh = max([len(s.hp_blocks) for s in seqs] + [1])
        mi = max([len(s.int2_blocks) for s in seqs] + [1])
        hp_bt = torch.full((len(seqs), mh), NULL_BLOCK, dtype=torch.int32)
        int2_bt = torch.full((len(seqs), mi), NULL_BLOCK, dtype=torch.int32)
        for i, s in enumerate(seqs):
            hp_bt[i, : len(s.hp_blocks)] = torch.tensor(self._hp_table(s), dtype=torch.int32)
            int2_bt[i, : len(s.int2_blocks)] = torch.tensor(s.int2_blocks, dtype=torch.int32)
        hp_lens = torch.tensor([self.hp_len(s.length) for s in seqs], dtype=torch.int32)
        int2_lens = torch.tensor([self.int2_len(s.length) for s in seqs], dtype=torch.int32)
        meta = DecodeMeta(hp_bt, hp_lens, int2_bt, int2_lens, max(hp_lens.tolist(), default=0),
                          max(int2_lens.tolist(), default=0))
        return meta.to(device)


def kernel_clip_index(cfg: QuantConfig, d: int) -> int:
    """Clip index the append kernels (CUDA, Triton) take: ``quant.clip_index`` when ``cfg`` clips, else -1
    (the kernels then skip the threshold search; clip_index's d - 1 would clip nothing, at a cost)."""
    return clip_index(cfg.clip_ratio, d) if cfg.clips else -1
