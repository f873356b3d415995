"""The paged backend of ``OscarCache``: K/V live in ``oscarkv.kernels`` pools, attention runs the kernels.

Why a backend of ``OscarCache`` and not a separate ``Cache`` subclass: the user-facing object, its
arguments (method, rotations, windows, page) and its window rule are the same on every device, so a user
writes the same code on CPU and GPU (``OscarCache(...)`` + ``enable_oscar_attention(model, cache)``)
and the device of the model picks the storage. What changes is only the storage of each layer
(``PagedLayer`` instead of the reference ``MixedWindowLayer``) and the attention function's branch, and
one object per cache (``PagedState``) holds what all layers share: the block manager
(``kernels.MixedKVCache``: one set of block tables for all layers, one ``MixedKVPool`` per layer), each
row's left padding, and the current forward's write plan and block tables.

Protocol of one forward (``T`` new tokens per row, all layers):

* layer 0's ``update`` calls ``PagedState.begin_forward(T)`` (unless a CUDA-graph runner planned the step
  already): host-side block bookkeeping, slot mappings and block tables, copied to the device;
* every layer's ``update`` rotates its new K/V (k @ R_K, v @ R_V, as the reference layer does) and keeps
  them for the attention function, which (``PagedLayer.attend``)
    - decode (T == 1 after a prefill): appends the new row with ``write_kv`` (which also demotes the
      row leaving the recent window into INT2), then runs ``decode_attention`` over the pools: the
      INT2 history is read as codes by the kernel, never dequantized to the model dtype;
    - prefill / a chunk: attention over [cached past | chunk] with ``prefill_attention`` (plain causal
      SDPA when there is no past), then ``write_kv`` of the chunk.
  q is rotated by R_K; the output is rotated back by R_V^T unless R_V^T was folded into o_proj. On a decode
  step whose queries' transform is R_K itself (no key rescale), q and k reach the append unrotated and
  ``write_kv(..., rotation=R_K, q=, q_out=)`` rotates both (inside the CUDA append kernel's launch, on tensor
  cores; the other backends rotate first): the step has no rotation GEMM, cast or copy kernels per layer
  (issue 8: they cost ~13 us per layer of the 8B's 128K step, BENCHMARKS.md).

Left padding: each row stores only its own tokens (the pools have no padding slots), so the kernels'
per-sequence window rule applies to each row in its own positions, like the reference layer's.

Departure from the reference cache (documented in ``OscarCache``): a multi-token chunk after the first
prefill sees the past as it was held *before* the chunk (the spec's hybrid prefill, section 5.4); the
reference cache shows it as held after the chunk's demotions. Single-token decode steps are identical.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from transformers.cache_utils import CacheLayerMixin

from ..errors import InputError, StateError, UnsupportedError
from ..methods import KVMethod, LayerPlan
from ..rotation import expand_heads, rotate, unrotate
from ..rotation.centering import add_value_mean, center, rotated_mean

BLOCK_SIZE = 16


def paged_support(method: KVMethod, head_dim: int, block_size: int = BLOCK_SIZE) -> str | None:
    """None if the paged kernels can run ``method``; else the reason (one line)."""
    if not method.quantized:
        return "method bf16 has nothing to quantize (use transformers' own caches)"
    if method.bits != 2 or method.per_channel_keys:
        return f"the paged kernels store token-wise INT2 only (method {method.name!r})"
    if method.levels != "uniform":
        return "the paged kernels implement uniform levels only (not lloyd-max)"
    if method.sink % block_size or method.recent % block_size or method.recent <= 0:
        return f"sink ({method.sink}) and recent ({method.recent}) must be multiples of {block_size}, recent > 0"
    if head_dim % 16 or head_dim & (head_dim - 1):
        return f"head_dim must be a power of two >= 16, got {head_dim}"
    g = min(method.group_size, head_dim)
    if g % (head_dim // 4):
        return f"group_size {method.group_size} must be a multiple of head_dim/4 = {head_dim // 4}"
    return None


class _StepUpload:
    """Every per-step host value of a decode step (write plan, lengths, positions, pages) in ONE host-to-device
    copy from a ring of pinned host buffers, with no host sync. Issue 8: a ``copy_`` from pageable memory
    synchronises the stream, so the host used to wait for the previous step's graph before it could plan
    the next one (0.31 ms of a 5.11 ms Qwen3-4B step at 128K, 1.2 ms of 22.5 at batch 59). The device
    buffer is read by the step's kernels in stream order, before the next step's copy overwrites it; a host
    slot is refilled only after the copy that read it ran (one event per slot; waits only when the GPU is
    ``SLOTS`` steps behind). On the CPU the same code runs with plain tensors."""

    SLOTS = 3

    def __init__(self, sizes: tuple[int, ...], device):
        n = sum(sizes)
        self.sizes = sizes
        self.cuda = torch.device(device).type == "cuda"
        self.host = [torch.empty(n, dtype=torch.int64, pin_memory=self.cuda) for _ in range(self.SLOTS)]
        self.events = [torch.cuda.Event() if self.cuda else None for _ in range(self.SLOTS)]
        self.dev = torch.empty(n, dtype=torch.int64, device=device)
        self.i = 0

    def dev_parts(self) -> list[torch.Tensor]:
        """Views of the device buffer, one per size (fixed storage: graph-capturable)."""
        return list(self.dev.split(self.sizes))

    def host_parts(self) -> list[torch.Tensor]:
        """Views of the next free host slot, to fill before ``send``."""
        ev = self.events[self.i]
        if ev is not None:
            ev.synchronize()
        return list(self.host[self.i].split(self.sizes))

    def send(self) -> None:
        self.dev.copy_(self.host[self.i], non_blocking=True)
        if self.events[self.i] is not None:
            self.events[self.i].record()
        self.i = (self.i + 1) % self.SLOTS


class PagedState:
    """What the layers of one paged cache share (see the module docstring)."""

    def __init__(self, method: KVMethod, plans: list[LayerPlan], num_kv_heads: int, head_dim: int,
                 max_tokens: int | None, kernel_backend: str = "auto"):
        self.method, self.plans = method, plans
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
        self.max_tokens = max_tokens
        self.kernel_backend = kernel_backend
        self.pad: torch.Tensor | None = None  # [B] host, set from the attention mask
        self.mgr = None
        self.pools: list = []
        self.n = 0  # padded width: tokens per row including its left padding
        self.preplanned = False  # a graph runner planned this forward already
        self.graph_capacity: int | None = None  # static table width (graph mode)
        self.cur = None  # this forward's plan: dict
        # Set when a forward stopped after some layers had written their rows (an exception between
        # begin_forward and the last layer): the manager's lengths and the pools no longer agree and a
        # page demotion may have reused ring slots, so there is nothing exact to roll back to. Every later
        # use raises this message instead of attending over half-written rows.
        self.broken: str | None = None
        # pool layout: "tile16" feeds the CUDA decode/append kernels (kernels/cuda_ops.py), "logical" the
        # Triton ones; "auto": tile16 on CUDA when the kernels build and the format allows it
        self.layout = "auto"
        self._layout_asked = "auto"  # the layout before allocate resolved "auto" (what reset() returns to)
        self._decode_plans: dict = {}
        # compiled decode step (graph.GraphDecoder(compile=True)): the layers hand q/k/v to the opaque op
        # ``oscarkv::paged_decode`` (cache/ops.py) instead of keeping per-layer Python state
        self.opaque = False
        self.handle: torch.Tensor | None = None
        self.epoch = 0  # counts resets: a GraphDecoder made before a reset refuses to step (its graph holds
        # the old pools' addresses)

    # ------------------------------------------------------------------ allocation
    DEFAULT_HEADROOM = 4096  # tokens per row past the first forward's width when max_tokens is not given

    def capacity_for(self, prompt: int) -> int:
        """Tokens per row the pools hold when the first forward is ``prompt`` tokens wide."""
        return self.max_tokens if self.max_tokens is not None else prompt + self.DEFAULT_HEADROOM

    def reset(self) -> None:
        """Back to the state before the first forward: the pools, tables, plans and padding are dropped and
        the next forward allocates anew for its own batch and length (layout choice and handle kept)."""
        self.pad, self.mgr, self.pools, self.n = None, None, [], 0
        self.preplanned, self.graph_capacity, self.cur, self.broken = False, None, None, None
        self.layout = self._layout_asked
        self._decode_plans, self._last_tables = {}, None
        self.epoch += 1

    def allocate(self, batch: int, device, dtype, prompt: int) -> None:
        from ..kernels import MixedKVCache, MixedKVPool, check_kernel_backend

        # before anything is planned or written: a refusal here leaves the cache empty and usable
        check_kernel_backend(self.kernel_backend, device)
        if self.pad is None:
            self.pad = torch.zeros(batch, dtype=torch.long)
        if self.pad.shape[0] != batch:
            raise InputError(f"padding was set for batch {self.pad.shape[0]}, but the states have batch {batch}")
        cap = self.capacity_for(prompt)
        if prompt - int(self.pad.min()) > cap:
            raise StateError(f"the prompt has {prompt} tokens but the paged OscarCache holds max_tokens={cap} per row; "
                             "create it with OscarCache(..., max_tokens=N) for a larger N")
        self.capacity = cap
        s, w, bs = self.method.sink, self.method.recent, BLOCK_SIZE
        page = bs  # MixedKVCache's default page: whole blocks leave the recent window together (TEAM decision 1)
        per_i2 = -(-max(0, cap - s - w) // bs) + 1
        # the hp tier holds the sink and a ring of W (page 1) or W + B slots (page-wise demotion)
        self.max_hp_len = min(cap, s + w + (page - 1 if page > 1 else 0))
        per_hp = -(-min(cap, s + w + (page if page > 1 else 0)) // bs) + 1
        self.mgr = MixedKVCache(batch * per_i2 + 1, batch * per_hp + 1, block_size=bs, sink=s, recent=w)
        self.page = self.mgr.page
        for r in range(batch):
            self.mgr.add(r)
        self._layout_asked = self.layout  # what reset() returns to
        layout = self.layout if self.layout != "auto" else self._auto_layout(device)
        self.pools = [
            MixedKVPool.allocate(batch * per_i2 + 1, batch * per_hp + 1, bs, self.num_kv_heads, self.head_dim,
                                 p.k_cfg, p.v_cfg, dtype=dtype, device=device, layout=layout)
            for p in self.plans
        ]
        self.layout = layout
        self.max_int2_blocks, self.max_hp_blocks = per_i2, per_hp
        self.batch, self.device = batch, device

    def _auto_layout(self, device) -> str:
        if torch.device(device).type != "cuda" or self.kernel_backend not in ("auto", "cuda"):
            return "logical"
        p = self.plans[0]
        if p.k_cfg.group(self.head_dim) != self.head_dim or p.k_cfg.scale_dtype not in ("float16", "log8"):
            return "logical"  # the CUDA kernels take one scale group per row, fp16 or log8 (cuda_ops.SCALE_FORMATS)
        from ..kernels import cuda_ops

        err = cuda_ops.load_error()  # builds (nvcc, once, cached) or says why not
        if err is not None:
            if self.kernel_backend == "cuda":
                raise err  # forced: say why, never run another kernel in its place
            warnings.warn(f"oscar-kv: the CUDA INT2 kernels cannot run ({str(err).splitlines()[0]}); the paged cache "
                          "runs the slower Triton kernels instead", RuntimeWarning, stacklevel=2)
            return "logical"
        return "tile16"

    def decode_plan(self, num_q_heads: int, dtype):
        """The CUDA kernel's ``DecodePlan`` for the fixed decode buffers (capacity maxima), one per
        (heads, dtype), shared by all layers and steps: no host work or allocation per call, so the step
        can be graph-captured. None when the CUDA kernel does not run this pool."""
        if self.layout != "tile16" or torch.device(self.device).type != "cuda" or self.kernel_backend not in ("auto", "cuda"):
            return None
        key = (num_q_heads, dtype)
        if key not in self._decode_plans:
            from ..kernels import CudaDecodeConfig, DecodePlan

            # early_reads: the previous kernel of every decode call here is this layer's append (decode_layer),
            # which writes BF16 rows and at most each sequence's newest INT2 page (CudaDecodeConfig)
            self._decode_plans[key] = DecodePlan(self.batch, num_q_heads, self.num_kv_heads, self.head_dim,
                                                 self.static_meta, self.device, dtype,
                                                 CudaDecodeConfig(early_reads=True),
                                                 scale_dtype=self.plans[0].k_cfg.scale_dtype)
        return self._decode_plans[key]

    def decode_layer(self, idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                     rotation: torch.Tensor | None = None) -> torch.Tensor:
        """One decode step of layer ``idx``: append the rotated rows k / v ``[B, Hkv, d]`` (``write_kv``,
        with page demotion) and attend with q ``[B, Hq, d]`` (rotated) over the pools -> ``[B, Hq, d]``,
        contiguous, q's dtype. With ``rotation`` (R_K, float32 ``[1 or Hkv, d, d]``) q and k arrive unrotated
        and the append rotates both (``write_kv(..., rotation=)``). The eager path and the compiled path's op
        (cache/ops.py) both call it."""
        from ..kernels import decode_attention, write_kv

        cur = self.cur
        if cur is None or not cur["decode"]:
            raise StateError("a paged decode step ran outside a planned decode forward (one token per row after a prefill)")
        pool, kb = self.pools[idx], self.kernel_backend
        # rows may be strided views (a fused q/k/v_proj's slices): every append backend reads them as they are
        # (row and head strides), so no copy kernel per layer and step
        if rotation is None:
            write_kv(pool, k, v, cur["plan"], backend=kb)
        else:
            qr = torch.empty(q.shape, dtype=q.dtype, device=q.device)
            write_kv(pool, k, v, cur["plan"], backend=kb, rotation=rotation, q=q, q_out=qr)
            q = qr
        plan = self.decode_plan(q.shape[1], q.dtype)
        kw = {} if plan is None else {"plan": plan}
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
        return decode_attention(q, pool, cur["after"], sm_scale=scale, backend=kb, out=out, **kw)

    def copy_rows(self, idx: int, src_rows: torch.Tensor) -> None:
        """Beam search's reorder for layer ``idx``: row r takes row ``src_rows[r]``'s K/V. The beams of one
        prompt hold equally many tokens with the same left padding, so their block lists have the same
        structure (the same appends in the same forwards): the blocks' contents are copied, pool tensor by
        pool tensor, and every block table, length and plan stays as it is."""
        from ..kernels.paged import TILE16_RECORD_FIELDS

        src = [int(x) for x in src_rows.tolist()]
        if self.mgr is None or src == list(range(self.batch)):
            return
        self.check_consistent()
        if len(src) != self.batch or not all(0 <= x < self.batch for x in src):
            raise UnsupportedError(f"the paged OscarCache reorders its {self.batch} rows among themselves; got "
                                   f"indices {src[:8]} (changing the batch is not supported)")
        lens, pad = self.row_lengths(), self.pad.tolist()
        bad = [r for r, x in enumerate(src) if (lens[r], pad[r]) != (lens[x], pad[x])]
        if bad:
            r = bad[0]
            raise UnsupportedError(f"the paged OscarCache copies a row only onto a row of the same length and "
                                   f"padding (the beams of one prompt); row {r} ({lens[r]} tokens) cannot take "
                                   f"row {src[r]} ({lens[src[r]]} tokens)")
        dst_hp, src_hp, dst_i2, src_i2 = [], [], [], []
        for r, x in enumerate(src):
            if r != x:
                (hr, ir), (hx, ix) = self.mgr.blocks(r), self.mgr.blocks(x)
                dst_hp, src_hp, dst_i2, src_i2 = dst_hp + hr, src_hp + hx, dst_i2 + ir, src_i2 + ix
        pool = self.pools[idx]
        for names, dst, from_ in ((TILE16_RECORD_FIELDS, dst_i2, src_i2), (("k_hp", "v_hp"), dst_hp, src_hp)):
            if dst:
                d = torch.tensor(dst, device=self.device)
                f = torch.tensor(from_, device=self.device)
                for n in names:
                    t = getattr(pool, n)
                    t[d] = t[f]  # the right side is gathered first: rows may swap

    def nbytes(self) -> int:
        from ..kernels.paged import POOL_TENSORS

        return sum(getattr(p, n).numel() * getattr(p, n).element_size() for p in self.pools for n in POOL_TENSORS)

    def row_lengths(self) -> list[int]:
        return [self.mgr.length(r) for r in range(self.batch)]

    # ------------------------------------------------------------------ one forward
    def begin_forward(self, t: int) -> None:
        """Plan the writes of ``t`` new tokens per row (host side) and build this forward's tables."""
        from ..kernels import OutOfBlocksError

        self.check_consistent()
        rows = list(range(self.batch))
        first = self.n == 0
        pad = self.pad.tolist() if first else [0] * self.batch
        if any(p >= t for p in pad) and first:
            raise InputError("a row of the first forward is all padding; every row needs at least one real token")
        counts = [t - p for p in pad]
        lens = self.row_lengths()
        over = [r for r in rows if lens[r] + counts[r] > self.capacity]
        if over:
            raise StateError(f"the paged OscarCache is full: row {over[0]} would hold {lens[over[0]] + counts[over[0]]} tokens, "
                             f"max_tokens={self.capacity}; create it with OscarCache(..., max_tokens=N) for a larger N")
        before = self.mgr.metadata(rows, self.device) if not first and t > 1 else None
        try:
            plan = self.mgr.plan_append(rows, counts)
        except OutOfBlocksError as e:  # should not happen after the check above
            raise StateError(f"the paged OscarCache ran out of blocks: {e}") from None
        self.n += t
        decode = t == 1 and not first
        cur = {"t": t, "decode": decode, "before": before, "first": first, "done": 0}
        if decode:  # eager or graph-replayed: the same fixed buffers, updated in O(batch) host work
            if self.graph_capacity is None:
                self.make_static()
            self._to_static(plan, lens)
            cur["plan"], cur["after"] = self.static_plan, self.static_meta
        else:
            cur["plan"] = plan.to(self.device)
            cur["after"] = None
        if not decode:
            # varlen packing of the real tokens of a [B, T] chunk (row-major, rows in order)
            sel = torch.cat([torch.arange(r * t + pad[r], (r + 1) * t) for r in rows])
            cur["sel"] = sel.to(self.device)
            cur["cu"] = [0] + torch.tensor(counts).cumsum(0).tolist()
        self.cur = cur

    def check_consistent(self) -> None:
        """Raise if an earlier forward stopped half way (see ``broken``); checks happen on the host before
        anything is planned, so a refused forward (full cache, all-padding row) changes nothing."""
        if self.broken is None and self.cur is not None and self.cur["done"] < len(self.pools):
            self.mark_broken(f"a forward stopped after {self.cur['done']} of {len(self.pools)} layers had written "
                             "their new rows")
        if self.broken is not None:
            raise StateError(self.broken)

    def mark_broken(self, what: str) -> None:
        self.broken = (f"this paged OscarCache is inconsistent ({what}) and cannot be rolled back; "
                       "create a new OscarCache and run the prompt again")

    def end_forward(self) -> None:
        """A graph replay ran every layer (the Python layer code runs only at capture)."""
        if self.cur is not None:
            self.cur["done"] = len(self.pools)

    # ------------------------------------------------------------------ CUDA graphs
    def make_static(self) -> None:
        """Preallocate fixed-shape device tables (capacity-wide) so a decode step can be graph-captured."""
        from ..kernels import DecodeMeta, WritePlan

        b, dev = self.batch, self.device
        z = lambda *s: torch.zeros(*s, dtype=torch.int32, device=dev)  # noqa: E731
        s, w = self.method.sink, self.method.recent
        self.static_meta = DecodeMeta(z(b, self.max_hp_blocks), z(b), z(b, self.max_int2_blocks), z(b),
                                      self.max_hp_len, max(0, self.capacity - s - w))
        # a step demotes 0 or one page per row: demotion lists padded with -1 (= nothing) to b * page.
        # The four lists are views of one buffer, so a step needs one host-to-device copy for them.
        nd = b * max(1, self.page)
        plan_sizes = (b, b, nd, nd)
        # one upload per step: the four plan lists, hp / int2 lengths, positions, the kernels' page view
        # the page view: a decode step (one token per row) demotes at most one page per row, page / bs whole
        # blocks (int2 lengths are multiples of the page, itself a multiple of bs when there is a page view)
        bs = self.mgr.block_size
        self._npg = b * max(1, self.page // bs)
        self._upload = _StepUpload(plan_sizes + (b, b, b, self._npg, self._npg * bs), dev)
        parts = self._upload.dev_parts()
        for t in parts:
            t.fill_(-1)
        self.static_plan = WritePlan(*parts[:4], True)
        self._static_lens = parts[4:6]
        self.static_pos = parts[6]  # positions of this step's tokens (GraphDecoder's position_ids)
        self._static_page_parts = (parts[7], parts[8].view(self._npg, bs))  # the whole page view
        self._buckets = [0] + [1 << i for i in range((self._npg - 1).bit_length())] + [self._npg]  # page_buckets()
        self.page_bucket = None  # the page view's length in the step's plan: a bucket of page_buckets()
        self._last_tables = None
        self.graph_capacity = self.capacity

    def page_buckets(self) -> list[int]:
        """The lengths the graph step's page view is padded to: 0, powers of two, and the whole table (one page
        per row). A step's pages go first and the rest of its bucket is null pages; GraphDecoder captures one
        graph per bucket. Why not one graph padded to the whole table: each null page still costs the CUDA append
        its CTAs' launch and exit, 6 us per layer-step at batch 59 on an H200 (one page per row), on the 15 of 16
        steps that demote nothing (BENCHMARKS.md, twenty-eighth session)."""
        return list(self._buckets)

    def use_page_bucket(self, n: int | None) -> None:
        """Point the static plan's page view at the first ``n`` pages of the fixed table (None: no page view)."""
        sp, (dst, src) = self.static_plan, self._static_page_parts
        sp.page_dst, sp.page_src = (None, None) if n is None else (dst[:n], src[:n])
        self.page_bucket = n

    def _table_may_change(self, t0: int, t1: int) -> bool:
        """Can a row's block tables differ after growing from t0 to t1 tokens? (a new int2 block, a ring
        reordered by a page demotion, or hp blocks still being allocated)"""
        m, bs = self.mgr, self.mgr.block_size
        i0, i1 = m.int2_len(t0), m.int2_len(t1)
        if -(-i0 // bs) != -(-i1 // bs) or (self.page > 1 and i0 != i1):
            return True
        return t1 <= self.method.sink + self.method.recent + self.page + bs

    def _to_static(self, plan, lens_before: list[int]) -> None:
        """Copy this step's plan and tables into the fixed buffers. Host work per decode step is O(batch):
        a row's tables are rebuilt (``MixedKVCache.metadata`` of that row) only when they can change,
        about once per block_size steps; lengths come from the manager's window rule."""
        rows = list(range(self.batch))
        sm = self.static_meta
        lens = self.row_lengths()
        incremental = self._last_tables is not None
        if not incremental:
            meta = self.mgr.metadata(rows, "cpu")
            for dst, src in zip((sm.hp_block_tables, sm.int2_block_tables), (meta.hp_block_tables, meta.int2_block_tables)):
                dst[:, : src.shape[1]].copy_(src)  # tables only grow: columns past src stay 0 (null block)
            sm.hp_lens.copy_(meta.hp_lens)
            sm.int2_lens.copy_(meta.int2_lens)
            self._last_tables = True
        else:
            for r in rows:
                if self._table_may_change(self._last_lens[r], lens[r]):
                    meta = self.mgr.metadata([r], "cpu")
                    for dst, src in zip((sm.hp_block_tables, sm.int2_block_tables), (meta.hp_block_tables, meta.int2_block_tables)):
                        # pinned + non_blocking: no host sync (torch's pinned-memory cache keeps the
                        # buffer until the copy ran)
                        src = src[0].pin_memory() if self._upload.cuda else src[0]
                        dst[r, : src.shape[0]].copy_(src, non_blocking=True)
        self._last_lens = lens
        # everything else of the step: one host-to-device copy without a sync (_StepUpload)
        hp = self._upload.host_parts()
        for part, name in zip(hp[:4], ("hp_slots", "int2_slots", "demote_src", "demote_dst")):
            src = getattr(plan, name)
            part.fill_(-1)
            part[: src.shape[0]] = src
        hp[4].copy_(torch.tensor([self.mgr.hp_len(t) for t in lens]))
        hp[5].copy_(torch.tensor([self.mgr.int2_len(t) for t in lens]))
        hp[6].copy_(torch.tensor(lens_before))
        # the kernels' page view (tile16 layout), padded with null pages that the CUDA append skips, up to the
        # smallest bucket that holds the step's pages. Always filled (a ring slot holds an older step's values)
        plan.fill_page_view(hp[7], hp[8].view(self._npg, -1))
        if plan.page_dst is None:
            self.use_page_bucket(None)
        else:
            self.use_page_bucket(next(n for n in self._buckets if n >= plan.page_dst.shape[0]))
        self._upload.send()
        if incremental:  # the lengths: device-side casts into the int32 tables of the step's DecodeMeta
            sm.hp_lens.copy_(self._static_lens[0])
            sm.int2_lens.copy_(self._static_lens[1])
        if not plan.fusable:
            raise StateError("a decode step's write plan is not fusable; this should not happen")


class PagedLayer(CacheLayerMixin):
    """One layer's view of a ``PagedState``: rotates and hands K/V to the OSCAR attention function."""

    is_sliding = False
    supports_early_init = False

    def __init__(self, state: PagedState, layer_idx: int, plan: LayerPlan):
        super().__init__()
        self.state, self.idx, self.plan = state, layer_idx, plan
        self.rotated_outputs = True
        self.fresh = False
        self.pending = None
        # R_V folded into v_proj (enable_oscar_attention(..., absorb_v_into_o_proj=True) on this backend):
        # values arrive rotated, only their rotated mean is subtracted
        self.v_folded = False

    def lazy_initialization(self, key_states, value_states) -> None:
        st = self.state
        if st.mgr is None:
            st.allocate(key_states.shape[0], key_states.device, key_states.dtype, key_states.shape[2])
        self.device, self.dtype = key_states.device, key_states.dtype
        dev = lambda t: None if t is None else t.to(self.device)  # noqa: E731
        self.k_rot, self.v_rot, self.q_rot = dev(self.plan.k_rot), dev(self.plan.v_rot), dev(self.plan.k_query_rot)
        # exact centering (rotation/centering.py): rows stored as (x - mean) @ R, mu_V added to the output
        self.k_mean, self.v_mean = dev(self.plan.k_mean), dev(self.plan.v_mean)
        self.v_mean_rot = rotated_mean(self.v_mean, self.v_rot)  # mu_V R_V, for values rotated by v_proj
        self.batch_size = key_states.shape[0]
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if self.pending is not None:
            raise StateError("the paged OscarCache needs the OSCAR attention function: call "
                             "oscarkv.integrations.transformers.enable_oscar_attention(model, cache)")
        st = self.state
        if self.idx == 0 and not st.preplanned:
            st.begin_forward(key_states.shape[2])
        kc = center(key_states, self.k_mean)
        if self.v_folded:  # v = x W_v'^T = (x W_v^T) R_V already: (v - mu) R_V = v' - mu R_V
            vr = center(value_states, self.v_mean_rot)
        else:
            vr = rotate(center(value_states, self.v_mean), self.v_rot)
        if st.opaque:  # compiled step: the attention function gets kc / vr (k rotated by the op's append or with q)
            return kc, vr
        kr = kc if self._rotates_in_append() else rotate(kc, self.k_rot)
        self.pending = (kr, vr)
        self.fresh = True
        return kr, vr

    def _rotates_in_append(self) -> bool:
        """A decode step whose append rotates k and the queries (``write_kv(..., rotation=)``): ``update`` keeps k
        unrotated and the attention function hands the unrotated queries and R_K to the append."""
        cur = self.state.cur
        return cur is not None and cur["decode"] and self._fused_rotation() is not None

    def _fused_rotation(self) -> torch.Tensor | None:
        """R_K as the append takes it (float32 ``[1 or Hkv, d, d]`` on the layer's device, cached) when the
        queries' transform is R_K itself (no key rescale), else None: q and k are then rotated by
        ``write_kv(..., rotation=)`` inside the append of a decode step (the CUDA append kernel does it in its
        launch), not by rotation GEMMs and copies of their own."""
        if not hasattr(self, "_rk32"):
            self._rk32 = None
            if self.q_rot is not None and self.plan.k_query_rot is self.plan.k_rot:
                d = self.k_rot.shape[-1]
                self._rk32 = self.k_rot.to(self.device, torch.float32).reshape(-1, d, d).contiguous()
        return self._rk32

    def _query_rotations(self, hq: int):
        """The queries' transform (R_K, or M^-T with a key rescale) and R_V per query head
        [1 or Hq, d, d] (``rotation.expand_heads``), and mu_V in the rotated basis, on the layer's device,
        cached (no host-to-device copy inside a captured CUDA graph)."""
        if getattr(self, "_rot_cache_key", None) != hq:
            def per_q(r):
                return None if r is None else expand_heads(r, hq).to(self.device, torch.float32).contiguous()

            self._rq, self._rv = per_q(self.q_rot), per_q(self.v_rot)
            self._vm = self.v_mean_rot  # mu_V R_V (lazy_initialization)
            self._rqk = self._fused_rotation()  # made here too: before torch.compile traces the step
            self._rot_cache_key = hq
        return self._rq, self._rv, self._vm

    def attend(self, query: torch.Tensor, scaling: float | None, unrotate_v: bool = True,
               key: torch.Tensor | None = None, value: torch.Tensor | None = None, add_mean: bool = True) -> torch.Tensor:
        """query [B, Hq, T, d] (model basis) -> attention output [B, T, Hq, d]: in the model's V basis, or
        in the rotated V basis when ``unrotate_v`` is False (R_V^T folded into o_proj). ``key`` / ``value``:
        what ``update`` returned in the compiled step (``state.opaque``): k centered, not yet rotated (it is
        rotated here together with q), v centered and rotated. ``add_mean`` False: the output stays centered
        (mu_V is in o_proj's bias, ``integrations.transformers``)."""
        hq = query.shape[1]
        rq, rv, vm = self._query_rotations(hq)
        if self.state.opaque:  # compiled decode step: one opaque op per layer (cache/ops.py)
            if query.shape[2] != 1 or key is None:
                raise StateError("the compiled paged step runs decode steps only (one token per row)")
            from . import ops  # noqa: F401  (registers torch.ops.oscarkv.paged_decode)

            scale = scaling if scaling is not None else 1.0 / math.sqrt(query.shape[-1])
            if self._rqk is not None:  # key arrives centered, not rotated (update): the append rotates q and k
                out = torch.ops.oscarkv.paged_decode(query[:, :, 0], key[:, :, 0], value[:, :, 0], self.state.handle,
                                                     self.idx, float(scale), self._rqk)[:, None]
            else:
                q, k = rotate(query, rq), rotate(key, self.k_rot)
                out = torch.ops.oscarkv.paged_decode(q[:, :, 0].contiguous(), k[:, :, 0], value[:, :, 0],
                                                     self.state.handle, self.idx, float(scale))[:, None]
        elif self._rotates_in_append():
            out = self._attend(query, scaling, self._rqk)
        else:
            out = self._attend(rotate(query, rq), scaling)
        if add_mean:
            out = add_value_mean(out, vm, heads_dim=2)  # centered values: + mu_V R_V (the reference's op)
        if unrotate_v and rv is not None:  # o = o_rot @ R_V^T per head, the reference path's op
            out = unrotate(out, rv, head_axis=-2).contiguous()
        return out

    def _attend(self, q: torch.Tensor, scaling: float | None, rotation: torch.Tensor | None = None) -> torch.Tensor:
        st = self.state
        try:
            out = self._attend_layer(q, scaling, rotation)
        except BaseException as e:
            st.mark_broken(f"layer {self.idx} failed while writing or attending: {type(e).__name__}")
            raise
        st.cur["done"] += 1
        return out

    def _attend_layer(self, q: torch.Tensor, scaling: float | None, rotation: torch.Tensor | None = None) -> torch.Tensor:
        """``rotation``: a decode step whose q and k are not rotated yet (``update``); its append rotates them."""
        from ..kernels import prefill_attention, write_kv

        st, cur = self.state, self.state.cur
        kr, vr = self.pending
        self.pending = None
        query = q
        b, hq, t, d = q.shape
        scale = scaling if scaling is not None else 1.0 / math.sqrt(d)
        pool, kb = st.pools[self.idx], st.kernel_backend
        if cur["decode"]:
            return st.decode_layer(self.idx, q[:, :, 0], kr[:, :, 0], vr[:, :, 0], scale, rotation)[:, None]
        sel = cur["sel"]
        flat = lambda x: x.transpose(1, 2).reshape(b * t, x.shape[1], d)[sel]  # noqa: E731
        qp, kp, vp = flat(q), flat(kr), flat(vr)
        if cur["first"]:  # no cached past: causal attention within each row's own tokens
            op = torch.empty_like(qp)
            cu = cur["cu"]
            g = hq // kp.shape[1]
            for r in range(b):
                s, e = cu[r], cu[r + 1]
                x = lambda y: y[s:e].transpose(0, 1)[None]  # noqa: E731
                # KV heads expanded to the query heads so that the flash / cuDNN backends take long prompts
                # (O(T) memory); enable_gqa can send a long prompt to the O(T^2) math backend
                kx = lambda y: x(y).repeat_interleave(g, dim=1) if g > 1 else x(y)  # noqa: E731
                op[s:e] = F.scaled_dot_product_attention(x(qp), kx(kp), kx(vp), is_causal=True,
                                                         scale=scale)[0].transpose(0, 1)
        else:
            op = prefill_attention(qp, kp, vp, cur["cu"], pool, cur["before"], sm_scale=scale)
        write_kv(pool, kp, vp, cur["plan"], backend=kb)
        out = query.new_zeros(b * t, hq, d)
        out[sel] = op
        return out.reshape(b, t, hq, d)

    # ------------------------------------------------------------------ Cache API
    def get_seq_length(self) -> int:
        return self.state.n

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.state.n + query_length, 0

    def get_max_length(self) -> int:
        return -1

    def reset(self) -> None:
        """Empty the cache for a new prompt (``PagedState.reset``; every layer calls it, the first one does it)."""
        if self.state.mgr is not None:
            self.state.reset()
        self.is_initialized, self.pending, self.fresh = False, None, False

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove:
            raise UnsupportedError("the paged OscarCache cannot be cropped (assisted decoding is not supported)")

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Beam search (``model.generate(num_beams=...)``): see ``PagedState.copy_rows``."""
        self.state.copy_rows(self.idx, beam_idx)

    def _unsupported(self, *a, **k):
        raise UnsupportedError("the paged OscarCache keeps the batch of its first forward (no batch selection or "
                               "expansion); start generate with the batch you need")

    batch_select_indices = batch_repeat_interleave = _unsupported
