"""vLLM-free core of the OSCAR attention backend: settings, page format, shadow pool, step plan, compute.

Nothing here imports vLLM, so the same code runs inside vLLM (``backend.py`` wraps it) and in tests on
the GPU machine, where vLLM cannot be installed, with tensors in vLLM's shapes. See the package
docstring (``oscarkv.integrations.vllm``) for the design and why.

Shapes (one attention layer, vLLM's "LBHNC" KV layout, Bv = vLLM block size):

    kv_cache (vLLM's page tensor, any dtype, viewed as uint8) [num_blocks, H_kv, Bv, C]
        OSCAR mode: C = cell_bytes = 2 * (d/4 + 2 * ng * sbytes) per (block, head, token):
            [k_codes d/4 | v_codes d/4 | k_scale ng | k_zero ng | v_scale ng | v_zero ng]
            (codes in the package's quartered INT2 packing, scale/zero in scale_dtype, ng = d / group;
            OSCAR_KV_SCALE_DTYPE=log8: one byte each, quant.format's log8 with the rotation file's tops)
        exact mode: C = 2 * d * dtype bytes: [rotated K | rotated V] in the model dtype (no quantization)
    shadow K / V (backend-owned)   [num_shadow_pages, H_kv, Bv, d] model dtype; page 0 is never used
    query / output                 [num_tokens, H_q, d]; key / value [num_tokens, H_kv, d]
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field

import torch

from ...errors import InputError, StateError
from ...kernels import decode_attention, write_kv
from ...kernels.paged import DecodeMeta, MixedKVPool, WritePlan, tile16_views
from ...kernels.layout import blocks_to_logical
from ...kernels.reference import attend, read_int2
from ...quant import QuantConfig, QuantizedRows, dequantize, int2_len, storage_dtype
from ...rotation import rotate, unrotate

ENV_ROTATIONS = "OSCAR_KV_ROTATIONS"
ENV_MODE = "OSCAR_KV_MODE"  # "oscar" (default) | "exact" (rotation only, no quantization)
ENV_SINK, ENV_RECENT, ENV_PAGE = "OSCAR_KV_SINK", "OSCAR_KV_RECENT", "OSCAR_KV_PAGE"
ENV_SHADOW_PAGES = "OSCAR_KV_SHADOW_PAGES"
ENV_KERNELS = "OSCAR_KV_KERNELS"  # "auto" (package kernels on CUDA where eligible) | "off" (torch everywhere)
# "auto" (the default: tile16 on CUDA where the CUDA decode kernel can read them, else cells) | "logical" (per-token
# cells) | "tile16" (the CUDA decode kernel's records, or an error where they do not fit)
ENV_LAYOUT = "OSCAR_KV_LAYOUT"
LAYOUTS = ("auto", "logical", "tile16")
# how scale and zero are stored: "float16" (default) | "log8" (one byte each: 8 d + 64 bytes per tile16 record at
# block size 16 instead of 8 d + 128; needs a rotation file with scale tops, `oscar-kv calibrate` writes them)
ENV_SCALE_DTYPE = "OSCAR_KV_SCALE_DTYPE"
SCALE_DTYPES = ("float16", "log8")
MODES = ("oscar", "exact")


# ----------------------------------------------------------------------------------------- settings
def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise InputError(f"{name}={raw!r} is not an integer; set it to a whole number of tokens") from None
    if v < 0:
        raise InputError(f"{name}={v} is negative; set it to 0 or more")
    return v


@dataclass(frozen=True)
class OscarSettings:
    """What the user switched on (environment variables, read once per process)."""

    rotations: str | None
    mode: str = "oscar"
    sink: int = 64
    recent: int = 256
    page: int = 16  # B of the window rule (TEAM decision 1); independent of vLLM's block size here
    group_size: int = 128
    scale_dtype: str = "float16"
    shadow_pages: int | None = None  # cap on shadow pages; None = derived from max_num_seqs
    kernels: str = "auto"
    layout: str = "auto"  # asked layout of the INT2 pages (LayerCompute._resolve_layout)

    @property
    def enabled(self) -> bool:
        return bool(self.rotations)

    @classmethod
    def from_env(cls) -> "OscarSettings":
        rot = os.environ.get(ENV_ROTATIONS) or None
        mode = os.environ.get(ENV_MODE, "oscar") or "oscar"
        if mode not in MODES:
            raise InputError(f"{ENV_MODE}={mode!r} is not a mode; use one of {', '.join(MODES)}")
        page = _env_int(ENV_PAGE, 16)
        if page < 1:
            raise InputError(f"{ENV_PAGE}=0 is not a page size; use 1 (per token) or 16 (default)")
        cap = os.environ.get(ENV_SHADOW_PAGES)
        kernels = os.environ.get(ENV_KERNELS, "auto") or "auto"
        if kernels not in ("auto", "off"):
            raise InputError(f"{ENV_KERNELS}={kernels!r} is not a choice; use auto or off")
        layout = os.environ.get(ENV_LAYOUT, "auto") or "auto"
        if layout not in LAYOUTS:
            raise InputError(f"{ENV_LAYOUT}={layout!r} is not a layout; use one of {', '.join(LAYOUTS)}")
        scale_dtype = os.environ.get(ENV_SCALE_DTYPE, "float16") or "float16"
        if scale_dtype not in SCALE_DTYPES:
            raise InputError(f"{ENV_SCALE_DTYPE}={scale_dtype!r} is not a scale format; use one of "
                             f"{', '.join(SCALE_DTYPES)}")
        return cls(
            rotations=rot,
            mode=mode,
            sink=_env_int(ENV_SINK, 64),
            recent=_env_int(ENV_RECENT, 256),
            page=page,
            shadow_pages=_env_int(ENV_SHADOW_PAGES, 0) or None if cap else None,
            kernels=kernels,
            layout=layout,
            scale_dtype=scale_dtype,
        )


# ------------------------------------------------------------------------------------ page format
@dataclass(frozen=True)
class PageFormat:
    """Bytes of one (block, head, token) cell and typed views of a vLLM page tensor."""

    head_dim: int
    mode: str
    dtype: torch.dtype  # model dtype (exact-mode cells, shadow pages)
    num_groups: int = 1
    scale_dtype: torch.dtype = torch.float16  # storage dtype of scale / zero (uint8: log8 bytes)

    @property
    def cell_bytes(self) -> int:
        d = self.head_dim
        if self.mode == "exact":
            return 2 * d * torch.tensor([], dtype=self.dtype).element_size()
        sb = torch.tensor([], dtype=self.scale_dtype).element_size()
        return 2 * (d // 4) + 4 * self.num_groups * sb

    def tile16_fits(self, kv_cache: torch.Tensor) -> bool:
        """Can each (block, KV head) region of the pages hold one tile16 record (the CUDA decode kernel's)? Its
        Bv cells of ``cell_bytes`` are exactly a record's 8 d + 128 bytes (log8: 8 d + 64) when Bv = 16, one
        fp16 or log8 scale group per row and head_dim 64 or 128 (the kernel's); the regions must be contiguous,
        in block-major order and 16-byte aligned (``cuda_ops.check_pool_records``)."""
        if not (self.mode == "oscar" and kv_cache.shape[2] == 16 and self.num_groups == 1
                and self.scale_dtype in (torch.float16, torch.uint8) and self.head_dim in (64, 128)):
            return False
        u8 = kv_cache.view(torch.uint8)
        nb, h, bv, c = u8.shape
        return u8.stride() == (h * bv * c, bv * c, c, 1) and u8.data_ptr() % 16 == 0

    def int2_views(self, kv_cache: torch.Tensor, layout: str = "logical") -> dict:
        """k_codes, v_codes [nb, H, Bv, d/4] uint8; k/v scale/zero [nb, H, Bv, ng] (strided views). Layout
        "logical": cell by cell ([k_codes | v_codes | k_scale | k_zero | v_scale | v_zero] per token);
        "tile16": each (block, KV head) region is one tile16 record (``kernels.paged.tile16_views``)."""
        u8 = kv_cache.view(torch.uint8)
        if u8.shape[-1] != self.cell_bytes:
            raise StateError(
                f"vLLM page cell is {u8.shape[-1]} bytes, the OSCAR format needs {self.cell_bytes}; "
                "the backend's customize_spec was bypassed (use the oscar-kv plugin's backend for every layer)"
            )
        if layout == "tile16":
            nb, h, bv, c = u8.shape
            return tile16_views(u8.view(nb, h, bv * c), self.head_dim, self.scale_dtype)
        q, ng = self.head_dim // 4, self.num_groups
        sb = torch.tensor([], dtype=self.scale_dtype).element_size()
        out = {"k_codes": u8[..., :q], "v_codes": u8[..., q : 2 * q]}
        off = 2 * q
        for name in ("k_scale", "k_zero", "v_scale", "v_zero"):
            out[name] = u8[..., off : off + ng * sb].view(self.scale_dtype)
            off += ng * sb
        return out

    def exact_views(self, kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = kv_cache.view(torch.uint8).view(self.dtype)
        d = self.head_dim
        if t.shape[-1] != 2 * d:
            raise StateError(f"vLLM page cell holds {t.shape[-1]} values, exact mode needs {2 * d}")
        return t[..., :d], t[..., d:]


# ---------------------------------------------------------------------------------- shadow pool
class ShadowManager:
    """Which vLLM block has a BF16 shadow page, shared by all layers of one KV-cache group.

    A mapping block -> shadow page is created when a block is in some running request's sink or
    recent window and stays until the page is reused for another block (lazy release: a request that
    hits the prefix cache soon after often finds its sink still shadowed). While a block is mapped,
    every write to it also goes to its shadow, so a mapped shadow always holds the block's current
    rows; a new mapping is filled from the block's INT2 rows (dequantized) before anything is written
    or read, so a shadow never holds another block's (stale) rows.
    """

    def __init__(self, cap: int):
        if cap < 2:
            raise InputError(f"{ENV_SHADOW_PAGES}={cap} is too small; it needs at least 2 pages")
        self.cap = cap  # page 0 is the null page
        self.block_to_page: dict[int, int] = {}
        self.page_to_block: dict[int, int] = {}
        self.last_live: dict[int, int] = {}  # page -> last step in which its block was live
        self.high = 1  # pages ever handed out are 1 .. high-1
        self.step = 0
        self._dense = None  # block -> page as a tensor, cached between assign() calls
        _MANAGERS.add(self)

    def assign(self, live: list[int]) -> tuple[list[int], list[int]]:
        """Map every block in ``live`` (this step's window blocks); return (blocks, pages) of the new
        mappings, which the layers fill from INT2 before writing. Pages of blocks not live this step are
        reused least-recently-live first; reuse drops the old block's mapping."""
        self.step += 1
        self._dense = None
        new_b, new_p = [], []
        for b in live:
            p = self.block_to_page.get(b)
            if p is not None:
                self.last_live[p] = self.step
        for b in live:
            if b in self.block_to_page:
                continue
            if self.high < self.cap:
                p = self.high
                self.high += 1
            else:
                cands = [(t, p) for p, t in self.last_live.items() if t < self.step]
                if not cands:
                    raise StateError(
                        f"the OSCAR BF16 window pool is full ({self.cap - 1} pages in use by running requests); "
                        f"raise {ENV_SHADOW_PAGES} or lower max_num_seqs"
                    )
                p = min(cands)[1]
                old = self.page_to_block.pop(p)
                del self.block_to_page[old]
            self.block_to_page[b] = p
            self.page_to_block[p] = b
            self.last_live[p] = self.step
            new_b.append(b)
            new_p.append(p)
        return new_b, new_p

    def lookup(self, blocks: torch.Tensor) -> torch.Tensor:
        """Shadow page of each block id (-1 = none), same shape, int64, on blocks' device."""
        need = max(max(self.block_to_page, default=0), int(blocks.max()) if blocks.numel() else 0) + 1
        if self._dense is None or self._dense.numel() < need:  # rebuilt once per step (assign resets it)
            dense = torch.full((need,), -1, dtype=torch.int64)
            if self.block_to_page:
                dense[torch.tensor(list(self.block_to_page.keys()))] = torch.tensor(list(self.block_to_page.values()))
            self._dense = dense
        return self._dense.to(blocks.device)[blocks.long().clamp_min(0)].masked_fill(blocks < 0, -1)


def default_shadow_cap(max_num_seqs: int, block_size: int, s: OscarSettings) -> int:
    """Pages that the windows of max_num_seqs running requests can need at once, plus the null page.

    Sink: ceil(S / Bv) pages; recent window: W .. W + B - 1 tokens starting anywhere in a page, so
    ceil((W + B - 1) / Bv) + 1 pages; one more for a chunk's own newest page.
    """
    per = -(-s.sink // block_size) + -(-(s.recent + s.page - 1) // block_size) + 2
    return 1 + max_num_seqs * per


# ------------------------------------------------------------------------------------ step plan
@dataclass
class StepPlan:
    """Per-step metadata shared by every layer (built once by the metadata builder)."""

    num_actual_tokens: int
    query_start_loc: list[int]  # host, [num_reqs + 1]
    seq_lens: list[int]  # host, tokens after this step
    block_size: int
    slot_mapping: torch.Tensor  # [num_tokens] int64 (vLLM's; -1 = padding)
    shadow_slots: torch.Tensor  # [num_tokens] int64: shadow slot that also gets the row, -1 = none
    fill_blocks: torch.Tensor  # [m] int64 vLLM blocks whose new shadow page must be filled from INT2
    fill_pages: torch.Tensor  # [m] int64
    num_shadow_pages: int  # shadow tensors must have at least this many pages
    # per request, the past [0, n - q) as slots: INT2 slots (vLLM) and high-precision slots (shadow)
    past_int2: list[torch.Tensor] = field(default_factory=list)
    past_hp: list[torch.Tensor] = field(default_factory=list)
    # Triton decode path (CUDA, OSCAR mode, q_len == 1 rows, aligned windows); None = not eligible
    decode_rows: torch.Tensor | None = None  # request indices
    decode_meta: DecodeMeta | None = None

    @property
    def num_reqs(self) -> int:
        return len(self.seq_lens)


def build_step(
    mgr: ShadowManager | None,
    s: OscarSettings,
    block_size: int,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    slot_mapping: torch.Tensor,
    num_actual_tokens: int,
    want_kernel: bool = False,
) -> StepPlan:
    """Plan one step from vLLM's CommonAttentionMetadata fields (``mgr`` None in exact mode).

    The past of request i (positions [0, n - q)) is read under the window rule at n, its length after
    this step, like ``OscarCache.update``: a position is high precision iff p < S or p >= S + int2_len(n).
    The step's own q tokens are attended unquantized (the reference's "new tokens unquantized").
    """
    dev = slot_mapping.device
    qsl = [int(x) for x in query_start_loc.cpu().tolist()]
    lens = [int(x) for x in seq_lens.cpu().tolist()]
    nr = len(lens)
    qsl = qsl[: nr + 1]
    bt = block_table[:nr].cpu().long()
    bs = block_size
    S, W, B = s.sink, s.recent, s.page
    slots = slot_mapping[:num_actual_tokens].long()
    if mgr is None:  # exact mode: everything full precision from the pages
        past_int2, past_hp = [], []
        for i in range(nr):
            n0 = lens[i] - (qsl[i + 1] - qsl[i])
            p = torch.arange(n0)
            past_hp.append((bt[i, p // bs] * bs + p % bs).to(dev))
        return StepPlan(num_actual_tokens, qsl, lens, bs, slots, torch.full_like(slots, -1),
                        torch.zeros(0, dtype=torch.long, device=dev), torch.zeros(0, dtype=torch.long, device=dev),
                        0, [], past_hp)

    # 1. blocks that hold some request's window positions at n (sink and recent), in request order
    live: list[int] = []
    windows = []
    for i in range(nr):
        n = lens[i]
        i2 = int2_len(n, S, W, B)
        rec0 = S + i2 if n > S else n
        windows.append((min(n, S), rec0, n, i2))
        pos_blocks = set(range(0, -(-min(n, S) // bs))) | set(range(rec0 // bs, -(-n // bs)))
        live.extend(int(bt[i, j]) for j in sorted(pos_blocks))
    live = list(dict.fromkeys(b for b in live if b > 0))
    fb, fp = mgr.assign(live)

    # 2. per new token: its shadow slot (if its block is mapped)
    tok_blocks = torch.where(slots >= 0, slots // bs, torch.full_like(slots, -1))
    pages = mgr.lookup(tok_blocks.cpu()).to(dev)
    shadow_slots = torch.where(pages > 0, pages * bs + slots % bs, torch.full_like(slots, -1))

    # 3. per request: slots of the past, split by precision
    past_int2, past_hp = [], []
    for i in range(nr):
        n = lens[i]
        n0 = n - (qsl[i + 1] - qsl[i])
        s_end, rec0, _, i2 = windows[i]
        p = torch.arange(n0)
        blk = bt[i, p // bs] if n0 else torch.zeros(0, dtype=torch.long)
        hp = (p < S) | (p >= rec0)
        vslot = blk * bs + p % bs
        page = mgr.lookup(blk[hp])
        if (page <= 0).any():  # cannot happen: every window block was just mapped
            raise StateError("internal: a window block has no shadow page")
        past_hp.append((page * bs + p[hp] % bs).to(dev))
        past_int2.append(vslot[~hp].to(dev))

    plan = StepPlan(num_actual_tokens, qsl, lens, bs, slots, shadow_slots,
                    torch.tensor(fb, dtype=torch.long, device=dev), torch.tensor(fp, dtype=torch.long, device=dev),
                    mgr.high, past_int2, past_hp)
    if want_kernel and W >= 1 and S % bs == 0 and B % bs == 0:
        _add_decode_meta(plan, mgr, bt, windows, S, bs, dev)
    return plan


def _add_decode_meta(plan: StepPlan, mgr: ShadowManager, bt, windows, S, bs, dev) -> None:
    """Two-tier tables for the package's decode kernel over the rows with one query token.

    hp tier = shadow pages of [sink blocks | recent blocks] (a prefix: only the newest page is partial),
    int2 tier = the request's own vLLM blocks from S / Bv on. Valid because S and B are multiples of
    Bv, so the INT2 region and the recent window start on page boundaries.
    """
    rows = [i for i in range(plan.num_reqs) if plan.query_start_loc[i + 1] - plan.query_start_loc[i] == 1]
    if not rows:
        return
    hp_tabs, hp_lens, i2_tabs, i2_lens = [], [], [], []
    for i in rows:
        s_len, rec0, n, i2 = windows[i]
        sink_blocks = list(range(-(-s_len // bs)))
        rec_blocks = list(range(rec0 // bs, -(-n // bs))) if n > S else []
        hp_ids = mgr.lookup(bt[i, sink_blocks + rec_blocks]) if (sink_blocks or rec_blocks) else torch.zeros(0, dtype=torch.long)
        hp_tabs.append(hp_ids)
        hp_lens.append(s_len + (n - rec0 if n > S else 0))
        i2_tabs.append(bt[i, S // bs : S // bs + i2 // bs])
        i2_lens.append(i2)
    mh = max([len(t) for t in hp_tabs] + [1])
    mi = max([len(t) for t in i2_tabs] + [1])
    hpt = torch.zeros(len(rows), mh, dtype=torch.int32)
    i2t = torch.zeros(len(rows), mi, dtype=torch.int32)
    for r, (a, b) in enumerate(zip(hp_tabs, i2_tabs)):
        hpt[r, : len(a)] = a.int()
        i2t[r, : len(b)] = b.int()
    meta = DecodeMeta(hpt, torch.tensor(hp_lens, dtype=torch.int32), i2t, torch.tensor(i2_lens, dtype=torch.int32),
                      max(hp_lens), max(i2_lens))
    plan.decode_rows = torch.tensor(rows, dtype=torch.long)
    plan.decode_meta = meta.to(dev)


# ------------------------------------------------------------------------------------ compute
_LAYERS: "weakref.WeakSet[LayerCompute]" = weakref.WeakSet()
_MANAGERS: "weakref.WeakSet[ShadowManager]" = weakref.WeakSet()
LAYERS_CREATED = {"oscar": 0, "exact": 0}  # per process: lets tests prove the backend really ran


def shadow_report() -> dict:
    """Shadow (BF16 window) memory of the live backend in this process: bytes allocated now, pages in
    use at the high-water mark, the pool's page cap, and bytes per page summed over layers."""
    layers = [lc for lc in _LAYERS if lc.shadow_k is not None]
    page_bytes = sum(2 * lc.shadow_k[0].numel() * lc.shadow_k.element_size() for lc in layers)
    mgrs = list(_MANAGERS)
    return {
        "allocated_bytes": sum(lc.shadow_bytes() for lc in layers),
        "page_bytes_all_layers": page_bytes,
        "pages_high_water": max([m.high - 1 for m in mgrs], default=0),
        "page_cap": max([m.cap - 1 for m in mgrs], default=0),
    }


def _center(x: torch.Tensor, mean: torch.Tensor | None) -> torch.Tensor:
    """x [T, H, d] minus mu ([H or 1, d]) through rotation/centering.center (which wants [..., H, T, d])."""
    if mean is None:
        return x
    from ...rotation.centering import center

    return center(x.transpose(0, 1), mean).transpose(0, 1)


class LayerCompute:
    """One attention layer: its rotations, clip/quant configs and shadow pages (lazily allocated)."""

    def __init__(self, fmt: PageFormat, k_cfg: QuantConfig | None, v_cfg: QuantConfig | None,
                 k_rot: torch.Tensor | None, v_rot: torch.Tensor | None, scale: float, kernels: str = "auto",
                 k_mean: torch.Tensor | None = None, v_mean: torch.Tensor | None = None,
                 q_rot: torch.Tensor | None = None, layout: str = "logical"):
        _LAYERS.add(self)
        LAYERS_CREATED[fmt.mode] += 1
        self.fmt, self.k_cfg, self.v_cfg = fmt, k_cfg, v_cfg
        # [R, d, d] float32 (R = 1 or H_kv), host; q_rot: the queries' transform when R_K is not orthogonal
        self.k_rot0, self.v_rot0, self.q_rot0 = k_rot, v_rot, (k_rot if q_rot is None else q_rot)
        # centering (rotation/centering.py, the one home of that math): rows stored as (x - mu) @ R, and
        # mu_V @ R_V added to the rotated output (softmax weights sum to 1, so this is exact)
        self.k_mean0, self.v_mean0 = k_mean, v_mean
        self.k_rot = self.v_rot = self.q_rot = self.k_mean = self.v_mean = self.v_out_mean = None
        levels = (k_cfg is not None and k_cfg.levels is not None) or (v_cfg is not None and v_cfg.levels is not None)
        d = fmt.head_dim
        if (levels or d < 16 or d & (d - 1)) and kernels in ("auto", "triton"):
            kernels = "off"  # the package's kernels: uniform levels, power-of-two head_dim (check_kernel_configs)
        if k_cfg is not None and k_cfg.log8 and kernels == "triton":
            kernels = "torch"  # the Triton kernels read float scale / zero; log8 runs the kernels' torch reference
        self.scale = scale
        self.kernels = kernels
        self.layout_asked, self.layout = layout, None  # resolved at the first forward (needs the pages)
        self.uniform = not levels
        self.shadow_k = self.shadow_v = None

    # -- state
    def _ensure(self, dev, num_kv_heads: int, block_size: int, pages: int) -> None:
        if self.k_rot is None and self.k_rot0 is not None:
            self.k_rot = self.k_rot0.to(dev, torch.float32)
            self.v_rot = self.v_rot0.to(dev, torch.float32)
            self.q_rot = self.q_rot0.to(dev, torch.float32)
            if self.k_mean0 is not None:
                from ...rotation.centering import rotated_mean

                self.k_mean = self.k_mean0.to(dev, torch.float32)
                self.v_mean = self.v_mean0.to(dev, torch.float32)
                self.v_out_mean = rotated_mean(self.v_mean, self.v_rot)  # [H_kv or 1, d], rotated basis
        if self.fmt.mode == "exact" or pages <= 0:
            return
        have = 0 if self.shadow_k is None else self.shadow_k.shape[0]
        if pages > have:
            new = max(pages, 2 * have, 2)
            shape = (new, num_kv_heads, block_size, self.fmt.head_dim)
            k = torch.zeros(shape, dtype=self.fmt.dtype, device=dev)
            v = torch.zeros(shape, dtype=self.fmt.dtype, device=dev)
            if have:
                k[:have], v[:have] = self.shadow_k, self.shadow_v
            self.shadow_k, self.shadow_v = k, v

    def shadow_bytes(self) -> int:
        return 0 if self.shadow_k is None else 2 * self.shadow_k.numel() * self.shadow_k.element_size()

    def _resolve_layout(self, kv_cache: torch.Tensor) -> str:
        """"tile16" (the pages hold the CUDA decode kernel's records) where it fits and is asked for ("auto":
        on CUDA with the package's kernels, when the CUDA kernels build), else "logical"."""
        fits = self.fmt.tile16_fits(kv_cache) and self.uniform
        if self.layout_asked == "tile16" and not fits:
            raise InputError(f"{ENV_LAYOUT}=tile16 needs vLLM block size 16, group_size >= head_dim, fp16 or log8 scales, "
                             "head_dim 64 or 128, uniform levels and contiguous pages; unset it to store cells")
        if self.layout_asked == "logical" or not fits:
            return "logical"
        if self.layout_asked == "auto":
            from ...kernels import cuda_ops

            if kv_cache.device.type != "cuda" or self.kernels != "auto" or cuda_ops.load_error() is not None:
                return "logical"  # the Triton kernels read cells
        return "tile16"

    def pool(self, kv_cache: torch.Tensor) -> MixedKVPool:
        """The package's pool type over vLLM's pages (INT2 tier) and the shadow pages (hp tier)."""
        if self.layout is None:
            self.layout = self._resolve_layout(kv_cache)
        v = self.fmt.int2_views(kv_cache, self.layout)
        return MixedKVPool(v["k_codes"], v["k_scale"], v["k_zero"], v["v_codes"], v["v_scale"], v["v_zero"],
                           self.shadow_k, self.shadow_v, self.k_cfg, self.v_cfg, self.layout)

    # -- forward
    def forward(self, query, key, value, kv_cache, plan: StepPlan, output) -> torch.Tensor:
        """Write this step's K/V (INT2 always, shadow where mapped), then attend; ``output`` [T, H_q, d]
        or [T, H_q * d] is filled and returned."""
        n = plan.num_actual_tokens
        dev = query.device
        hkv, bs = kv_cache.shape[1], kv_cache.shape[2]
        self._ensure(dev, hkv, bs, plan.num_shadow_pages)
        # [T, H, d] rows: rotation.rotate's per-head rule (query heads use their KV head's R)
        kr = rotate(_center(key[:n], self.k_mean), self.k_rot, head_axis=-2)
        vr = rotate(_center(value[:n], self.v_mean), self.v_rot, head_axis=-2)
        qr = rotate(query[:n], self.q_rot, head_axis=-2)
        valid = plan.slot_mapping >= 0
        if self.fmt.mode == "exact":
            kc, vc = self.fmt.exact_views(kv_cache)
            sl = plan.slot_mapping[valid]
            kc[sl // bs, :, sl % bs] = kr[valid].to(kc.dtype)
            vc[sl // bs, :, sl % bs] = vr[valid].to(vc.dtype)
            o = self._attend(qr, kr, vr, plan, (kc, vc), None)
        else:
            pool = self.pool(kv_cache)
            self._fill(pool, plan)
            be = self._write_backend(dev)
            none = torch.full_like(plan.slot_mapping, -1)
            # every token in INT2 (clip + quantize), then the rows of mapped blocks in the shadow
            write_kv(pool, kr, vr, WritePlan(none, plan.slot_mapping, none, none, True), backend=be)
            write_kv(pool, kr, vr, WritePlan(plan.shadow_slots, none, none, none, True), backend=be)
            partial = None
            if plan.decode_meta is not None and self._decode_backend(dev) is not None:
                partial = self._decode_kernel(pool, qr, plan, self._decode_backend(dev))
            o = self._attend(qr, kr, vr, plan, None, pool, partial=partial)
        if self.v_out_mean is not None:
            from ...rotation.centering import value_output_mean

            o = o + value_output_mean(self.v_out_mean, o.shape[1]).to(o.dtype)[None]
        o = unrotate(o.to(query.dtype), self.v_rot, head_axis=-2)
        out = output[:n].view(n, -1, self.fmt.head_dim)
        out.copy_(o.to(output.dtype))
        return output

    def _decode_backend(self, dev) -> str | None:
        """Backend of the package's decode kernel for q_len == 1 rows: "auto" on CUDA; tests force
        "torch" (the kernels' reference over the same tables) or "triton" (TRITON_INTERPRET on CPU)."""
        if self.kernels == "auto":
            return "auto" if dev.type == "cuda" else None
        if self.kernels == "triton" and self.layout == "tile16":
            return "torch"  # the Triton decode kernel reads cells; tile16 records are the CUDA kernel's
        return None if self.kernels == "off" else self.kernels

    def _write_backend(self, dev) -> str:
        if self.kernels == "triton":
            return "triton"
        return "auto" if self.kernels == "auto" and dev.type == "cuda" else "torch"

    def _fill(self, pool: MixedKVPool, plan: StepPlan) -> None:
        if plan.fill_blocks.numel() == 0:
            return
        b, p = plan.fill_blocks, plan.fill_pages
        for which, cfg, hp in (("k", self.k_cfg, pool.k_hp), ("v", self.v_cfg, pool.v_hp)):
            rows = QuantizedRows(*blocks_to_logical(pool, b, which), pool.head_dim, 2)
            hp[p] = dequantize(rows, cfg, dtype=hp.dtype)

    def _decode_kernel(self, pool: MixedKVPool, qr, plan: StepPlan, backend: str):
        rows = plan.decode_rows.to(qr.device)
        starts = torch.tensor(plan.query_start_loc[:-1], device=qr.device)[rows]
        qd = qr[starts].to(pool.k_hp.dtype)
        od = decode_attention(qd, pool, plan.decode_meta, sm_scale=self.scale, backend=backend)
        return {int(r): od[j] for j, r in enumerate(plan.decode_rows.tolist())}

    def _attend(self, qr, kr, vr, plan: StepPlan, exact_views, pool, partial=None):
        """Torch reference: per request, [past (shadow rows | INT2 rows dequantized) | step rows unquantized]."""
        out = torch.empty(qr.shape, dtype=torch.float32, device=qr.device)
        bs = plan.block_size
        for i in range(plan.num_reqs):
            a, e = plan.query_start_loc[i], plan.query_start_loc[i + 1]
            if e == a:
                continue
            if partial is not None and i in partial:
                out[a] = partial[i].float()
                continue
            if exact_views is not None:
                kc, vc = exact_views
                sl = plan.past_hp[i]
                kp, vp = kc[sl // bs, :, sl % bs].float(), vc[sl // bs, :, sl % bs].float()
            else:
                hs, qs = plan.past_hp[i], plan.past_int2[i]
                hk = pool.k_hp[hs // bs, :, hs % bs].float()
                hv = pool.v_hp[hs // bs, :, hs % bs].float()
                qk = dequantize(read_int2(pool, qs, "k"), self.k_cfg)
                qv = dequantize(read_int2(pool, qs, "v"), self.v_cfg)
                kp, vp = torch.cat([hk, qk], 0), torch.cat([hv, qv], 0)
            c, lp = e - a, kp.shape[0]
            mask = torch.ones(c, lp + c, dtype=torch.bool, device=qr.device)
            mask[:, lp:] = torch.ones(c, c, dtype=torch.bool, device=qr.device).tril()
            kk, vv = torch.cat([kp, kr[a:e].float()], 0), torch.cat([vp, vr[a:e].float()], 0)
            out[a:e] = attend(qr[a:e].float(), kk, vv, self.scale, mask)
        return out


def layer_compute_for(layer_idx: int, s: OscarSettings, rotations, head_dim: int, dtype: torch.dtype,
                      scale: float) -> LayerCompute:
    """LayerCompute for one layer from a RotationSet: rotations and clip ratios through the method
    object's layer plan, served as the file was fitted (``file_recipe``)."""
    from ...methods import make_method

    m = make_method("oscar", sink=s.sink, recent=s.recent, group_size=s.group_size, scale_dtype=s.scale_dtype,
                    **file_recipe(rotations))
    plan = m.layer_plan(layer_idx, head_dim, rotations)
    extra = dict(k_mean=plan.k_mean, v_mean=plan.v_mean, q_rot=plan.k_qrot)
    if s.mode == "exact":
        fmt = PageFormat(head_dim, "exact", dtype)
        return LayerCompute(fmt, None, None, plan.k_rot, plan.v_rot, scale, s.kernels, **extra)
    ng = head_dim // plan.k_cfg.group(head_dim)
    if plan.v_cfg.group(head_dim) != plan.k_cfg.group(head_dim):
        raise InputError("K and V must share group_size in the vLLM backend")
    fmt = PageFormat(head_dim, "oscar", dtype, ng, storage_dtype(s.scale_dtype))
    return LayerCompute(fmt, plan.k_cfg, plan.v_cfg, plan.k_rot, plan.v_rot, scale, s.kernels, layout=s.layout,
                        **extra)


def check_file_for(s: OscarSettings, rotations) -> None:
    """One-line refusal of a rotation file that cannot serve these settings (before any model is built)."""
    if s.mode == "oscar" and s.scale_dtype == "log8" and rotations.k_scale_top is None:
        raise InputError(f"{ENV_SCALE_DTYPE}=log8 needs a rotation file with log8 scale tops; calibrate it again "
                         f"with `oscar-kv calibrate` (files before the forty-eighth session lack them) or unset "
                         f"{ENV_SCALE_DTYPE}")


def file_recipe(rotations) -> dict:
    """The oscar method's options as the file was fitted: centered iff its clip ratios / R_V were fitted for
    centered rows (``RotationSet.centered``, ``calibrate --plus``; files from plain ``calibrate`` store the
    means too but are served uncentered, as the paper's oscar method is), Lloyd-Max levels iff it has them
    (``calibrate --levels lloyd-max``; those layers then run the torch path, the kernels take uniform levels).
    The key rescale (``--key-scale``) needs no option: the plan takes the file's query transform."""
    return {"center": "on" if rotations.centered else "off",
            "levels": "uniform" if rotations.k_levels is None else "lloyd-max"}


def tokens_per_gib(cell_bytes: int, num_layers: int, num_kv_heads: int) -> float:
    return 2**30 / (cell_bytes * num_layers * num_kv_heads)

