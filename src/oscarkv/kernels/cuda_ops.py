"""CUDA kernels of the tile16 pool (``cuda/int2_paged.cu``): build at first use, plan/run decode, append.

Build: ``nvcc`` compiles the shipped ``.cu`` into a shared library (sm_80 + sm_90a) cached under
``$OSCARKV_KERNEL_CACHE`` (default ``~/.cache/oscar-kv/kernels``) in a folder named by a hash of the
source and the flags; later imports load it with ctypes. The library takes raw device pointers and the
current torch stream, so it needs no torch headers and no torch C++ build (a plain nvcc is enough).

Plan / run (FlashInfer's plan()/run() split): ``DecodePlan`` fixes the split counts from host-side
maxima and preallocates the workspace (partial outputs, LSEs, merge counters) once per decode step;
``DecodePlan.run`` then launches ONE kernel per layer (split-K over the BF16 and INT2 tiers, merged by
the last CTA of each (sequence, KV head)), with no host sync and no allocation: CUDA-graph capturable.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..errors import InputError, StateError
from .paged import DecodeMeta, MixedKVPool, WritePlan, kernel_clip_index, tile16_record_offsets


def _default_src() -> Path:
    """The kernel source: the shipped ``cuda/int2_paged.cu``, or ``$OSCARKV_KERNEL_SRC`` (kernel development:
    run the GPU tests or benchmarks of a candidate ``.cu`` without switching trees; its library is cached
    under its own hash like the shipped one's)."""
    return Path(os.environ.get("OSCARKV_KERNEL_SRC") or Path(__file__).with_name("cuda") / "int2_paged.cu")


_SRC = _default_src()
# --threads 0: the two architectures compile in parallel (the build doubled with the log8 records' instantiations)
_FLAGS = ["-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo", "--threads", "0",
          "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90a,code=sm_90a"]
_LIB = None
# Programmatic dependent launch (Hopper): the decode and append kernels may be scheduled while the previous
# kernel of the stream finishes (they wait for it before touching memory), hiding launch latency. On by
# default since the 2026-12-03 (fourth session) H200 run: decode 0.5-2 us faster per batch-1 call, append
# 1.92 -> 1.48 us per step (BENCHMARKS.md); OSCARKV_PDL=0 turns it off.
USE_PDL = os.environ.get("OSCARKV_PDL", "1") != "0"


class CudaKernelUnavailable(StateError):
    """The CUDA kernels cannot be built or loaded here (no nvcc, no GPU, unsupported shape)."""


def _cache_dir() -> Path:
    return Path(os.environ.get("OSCARKV_KERNEL_CACHE", Path.home() / ".cache" / "oscar-kv" / "kernels"))


def library_path() -> Path:
    if not _SRC.is_file():
        raise CudaKernelUnavailable(f"kernel source {_SRC} not found: unset OSCARKV_KERNEL_SRC or point it at a .cu file")
    h = hashlib.sha256(_SRC.read_bytes() + " ".join(_FLAGS).encode()).hexdigest()[:16]
    return _cache_dir() / h / "liboscar_int2.so"


def nvcc_path() -> str | None:
    """The nvcc that builds the library: on PATH, else the toolkit's default location; None if neither."""
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


def build(verbose: bool = False) -> Path:
    """Compile the library if it is not cached yet; returns its path."""
    out = library_path()
    if out.exists():
        return out
    nvcc = nvcc_path()
    if nvcc is None:
        raise CudaKernelUnavailable("nvcc not found: install the CUDA toolkit (or set PATH) to build the INT2 kernels")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [nvcc, *_FLAGS, "-o", str(tmp), str(_SRC)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CudaKernelUnavailable(f"nvcc failed ({' '.join(cmd)}):\n{r.stderr[-3000:]}")
    if verbose:
        print(r.stderr)
    os.replace(tmp, out)
    return out


_LUT = 64  # entries of DecodeParams::split_lut
# paired-tile variants (CudaDecodeConfig.variant) -> the single-tile variant they pair (same warps and ring)
PAIRED_VARIANTS = {10: 0, 11: 4, 14: 7}


class _DecodeParams(ctypes.Structure):
    _fields_ = [
        ("q", ctypes.c_void_p), ("q_sb", ctypes.c_int64), ("q_sh", ctypes.c_int64),
        ("records", ctypes.c_void_p), ("c_sblk", ctypes.c_int64), ("c_sh", ctypes.c_int64),
        ("k_hp", ctypes.c_void_p), ("v_hp", ctypes.c_void_p),
        ("h_sblk", ctypes.c_int64), ("h_sh", ctypes.c_int64), ("h_srow", ctypes.c_int64),
        ("hp_table", ctypes.c_void_p), ("hp_table_s", ctypes.c_int64), ("hp_lens", ctypes.c_void_p),
        ("int2_table", ctypes.c_void_p), ("int2_table_s", ctypes.c_int64), ("int2_lens", ctypes.c_void_p),
        ("o_part", ctypes.c_void_p), ("lse_part", ctypes.c_void_p), ("counters", ctypes.c_void_p),
        ("out", ctypes.c_void_p), ("o_sb", ctypes.c_int64), ("o_sh", ctypes.c_int64),
        ("hkv", ctypes.c_int), ("group", ctypes.c_int), ("n_hp", ctypes.c_int), ("n_int2", ctypes.c_int),
        ("scale_log2", ctypes.c_float), ("early", ctypes.c_int), ("probe", ctypes.c_int),
        ("l2_evict_first", ctypes.c_int), ("lut_tiles", ctypes.c_int), ("split_lut", ctypes.c_uint16 * _LUT),
        ("hp_lut", ctypes.c_uint16 * _LUT), ("split_major", ctypes.c_int), ("merge_poll", ctypes.c_int),
        ("merge_slices", ctypes.c_int), ("k_top", ctypes.c_int), ("v_top", ctypes.c_int),
    ]


class _AppendParams(ctypes.Structure):
    _fields_ = [
        ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
        ("k_sr", ctypes.c_int64), ("k_sh", ctypes.c_int64), ("v_sr", ctypes.c_int64), ("v_sh", ctypes.c_int64),
        ("hp_slots", ctypes.c_void_p), ("n_rows", ctypes.c_int),
        ("page_dst", ctypes.c_void_p), ("page_src", ctypes.c_void_p), ("n_pages", ctypes.c_int),
        ("k_codes", ctypes.c_void_p), ("v_codes", ctypes.c_void_p), ("c_sblk", ctypes.c_int64), ("c_sh", ctypes.c_int64),
        ("k_scale", ctypes.c_void_p), ("k_zero", ctypes.c_void_p), ("v_scale", ctypes.c_void_p), ("v_zero", ctypes.c_void_p),
        ("s_sblk", ctypes.c_int64), ("s_sh", ctypes.c_int64),
        ("k_hp", ctypes.c_void_p), ("v_hp", ctypes.c_void_p),
        ("h_sblk", ctypes.c_int64), ("h_sh", ctypes.c_int64), ("h_srow", ctypes.c_int64),
        ("hkv", ctypes.c_int), ("clip_k", ctypes.c_int), ("clip_v", ctypes.c_int),
        ("do_pages", ctypes.c_int), ("do_rows", ctypes.c_int),
        ("rot", ctypes.c_void_p), ("rot_heads", ctypes.c_int), ("q", ctypes.c_void_p), ("q_out", ctypes.c_void_p),
        ("q_sr", ctypes.c_int64), ("q_sh", ctypes.c_int64), ("group", ctypes.c_int),
        ("log8", ctypes.c_void_p), ("k_top", ctypes.c_int), ("v_top", ctypes.c_int),
    ]


def lib():
    global _LIB
    if _LIB is None:
        if not torch.cuda.is_available():
            raise CudaKernelUnavailable("the INT2 CUDA kernels need a CUDA GPU")
        L = ctypes.CDLL(str(build()))
        sizes = (ctypes.c_int * 2)()
        L.oscar_params_sizes(sizes)
        if sizes[0] != ctypes.sizeof(_DecodeParams) or sizes[1] != ctypes.sizeof(_AppendParams):
            raise CudaKernelUnavailable(f"parameter struct mismatch: C {list(sizes)} vs ctypes "
                                        f"{[ctypes.sizeof(_DecodeParams), ctypes.sizeof(_AppendParams)]}")
        for f in (L.oscar_int2_decode, L.oscar_append):
            f.restype = ctypes.c_int
        L.oscar_int2_decode.argtypes = [ctypes.POINTER(_DecodeParams), ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        for f in (L.oscar_int2_decode_occupancy, L.oscar_int2_decode_warps, L.oscar_int2_decode_cluster,
                  L.oscar_int2_decode_max_clusters):
            f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]  # dtype, head_dim, variant, format
        L.oscar_trace.argtypes = [ctypes.c_void_p, ctypes.c_int]  # bench/trace_decode.py (an OSCARKV_TRACE build)
        L.oscar_read_pattern.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                         ctypes.c_int, ctypes.c_void_p]
        L.oscar_append.argtypes = [ctypes.POINTER(_AppendParams), ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                   ctypes.c_int, ctypes.c_int]
        L.oscar_read_records.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                         ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
        _LIB = L
    return _LIB


def load_error() -> Exception | None:
    """None when the CUDA kernels load here (built once if needed), else why not: no CUDA GPU, no nvcc, a failed
    build, an unloadable library (``CudaKernelUnavailable`` or ``OSError``). The callers that fall back to other
    kernels ask this."""
    try:
        lib()
    except (CudaKernelUnavailable, OSError) as e:
        return e
    return None


_DT = {torch.bfloat16: 0, torch.float16: 1}
# the records' scale format (the kernels' template SF) by QuantConfig.scale_dtype
SCALE_FORMATS = {"float16": 0, "log8": 1}
_LOG8_TABLES: dict = {}


def scale_format(pool: MixedKVPool) -> int:
    """SCALE_FORMATS code of a pool whose scale format the kernels read (check with ``unsupported_reason``)."""
    return SCALE_FORMATS[pool.k_cfg.scale_dtype]


def log8_table(device) -> torch.Tensor:
    """The log8 format's table as the append kernel reads it (AppendParams::log8): float32 [512] on ``device``
    (cached)."""
    dev = torch.device(device)
    if dev not in _LOG8_TABLES:
        from ..quant.format import LOG8_MIDS, LOG8_SCALES

        _LOG8_TABLES[dev] = torch.cat([LOG8_SCALES, LOG8_MIDS, torch.zeros(1)]).to(dev)
    return _LOG8_TABLES[dev]


def _log8_args(pool: MixedKVPool, device) -> tuple[int, int, int]:
    """(table pointer, k_top, v_top) of a log8 pool, (0, 0, 0) otherwise."""
    if not pool.k_cfg.log8:
        return 0, 0, 0
    return log8_table(device).data_ptr(), pool.k_cfg.scale_top, pool.v_cfg.scale_top


def _pdl(device) -> int:
    """1 when the launch may use programmatic dependent launch (sm_90+ and USE_PDL)."""
    return int(USE_PDL and torch.cuda.get_device_capability(device)[0] >= 9)


def unsupported_reason(q: torch.Tensor, pool: MixedKVPool) -> str | None:
    """None when the CUDA decode kernel runs this call, else why not (one line)."""
    if not q.is_cuda:
        return "tensors are not on a CUDA device"
    if pool.layout != "tile16":
        return f"pool layout is {pool.layout!r} (the CUDA kernel reads 'tile16'; allocate with layout='tile16')"
    if q.dtype not in _DT or pool.k_hp.dtype != q.dtype:
        return f"q ({q.dtype}) and the hp pool ({pool.k_hp.dtype}) must both be bf16 or both fp16"
    if pool.head_dim not in (64, 128):
        return f"head_dim {pool.head_dim} (CUDA kernel: 64 or 128)"
    if pool.k_cfg.scale_dtype not in SCALE_FORMATS or pool.num_groups != 1:
        return f"CUDA kernel needs scale_dtype in {sorted(SCALE_FORMATS)} and one group per row"
    g = q.shape[1] // pool.num_kv_heads
    if g > 8:
        return f"GQA group {g} > 8"
    return None


def check_pool_records(pool: MixedKVPool) -> tuple[int, int]:
    """The CUDA kernels read and write a tile16 pool as records (``paged.tile16_records``): per (block, KV head)
    K codes | V codes | k_scale | k_zero | v_scale | v_zero contiguous, 16-byte aligned; the hp tensors with
    contiguous rows and equal strides. Returns the record strides in bytes (per block, per KV head); strides
    of dimensions of size 1 are not checked (torch leaves them arbitrary, the kernels multiply them by 0)."""
    if pool.k_cfg.scale_dtype not in SCALE_FORMATS:  # the kernels' records (TB in int2_paged.cu)
        raise ValueError(f"the CUDA kernels read scale_dtype in {sorted(SCALE_FORMATS)}, the pool has "
                         f"{pool.k_cfg.scale_dtype!r}")
    offs, rec = tile16_record_offsets(pool.head_dim, pool.k_scale.element_size())
    want = (pool.num_kv_heads * rec, rec)
    base = pool.k_codes.data_ptr()
    for name, off in offs.items():
        t = getattr(pool, name)
        es, sh, st = t.element_size(), t.shape, t.stride()
        if (t.data_ptr() != base + off or any(sh[i] > 1 and st[i] * es != want[i] for i in (0, 1))
                or st[2] != sh[3] or (sh[3] > 1 and st[3] != 1)):
            raise ValueError(f"pool tensor {name} is not in the tile16 record layout the CUDA kernels read "
                             "(allocate the pool with MixedKVPool.allocate(..., layout='tile16'))")
    if base % 16:
        raise ValueError("tile16 records must be 16-byte aligned (allocate with MixedKVPool.allocate)")
    for t in (pool.k_hp, pool.v_hp):
        if t.stride() != pool.k_hp.stride() or t.stride(3) != 1 or t.data_ptr() % 16:
            raise ValueError("the hp pool tensors need contiguous 16-byte aligned rows and equal strides")
    return want


@dataclass(frozen=True)
class CudaDecodeConfig:
    """Launch knobs of the CUDA decode kernel.

    variant:         how deep each warp's cp.async shared-memory ring of INT2 tiles is, and the CTA size:
                     0 = 4 tiles, 1 = 8, 2 = 6, 3 = 10 with 4 warps per CTA (4 CTAs/SM, 3 for variant 3 at
                     head_dim 128); 4 = 4 tiles, 7 = 8 tiles with 8 warps per CTA (2 CTAs/SM: half the
                     splits); 5 = 4 tiles, 6 = 8 tiles with 16 warps per CTA (1 CTA/SM: a quarter of the
                     splits, so the last CTA merges fewer partial results); 8 = 4 tiles, 16 warps, and
                     9 = 4 tiles, 8 warps, launched in clusters of 16 / 8 CTAs that are all the splits of a
                     (sequence, KV head) and merge through distributed shared memory (sm_90; no partials in
                     global memory, no arrival atomic). Opt-in only: GPU-tested, but measured faster only
                     for short batch-1 calls (H200, sixth session: 4K b1 8.1 us for 9 vs 9.2 for 4), and much
                     slower at length (128K b1 66.9 us for 8, 83.5 for 9, vs 36.2 for 4; 128K b32 1243 / 998
                     vs 903): one cluster per (sequence, KV head) leaves a batch-1 call 8 clusters, too few
                     CTAs (9) or more 16-CTA clusters than fit at once (8). Twelfth session: 8 warps in
                     clusters of 16 (exactly the 2 + 14 splits the split model picks for variant 4 at 32K
                     batch 1, merged through distributed shared memory) was slower at every batch-1 point
                     (32K 18.9 vs 14.1 us, 128K 50.4 vs 31.2): removed, patch
                     bench/results/2026-12-04_s12e_variant10.patch. (Measured and removed in the
                     fifth session, BENCHMARKS.md: 4 warps x 5 CTAs per SM at <= 96 registers, which spills,
                     40% slower at 128K batch 1; four score-accumulator chains instead of two, within noise
                     at batch 1, 3-5% slower at 128K batch 32. Two tiles per loop step,
                     both tiles' score MMAs before either softmax, was measured slower at every shape and
                     removed: BENCHMARKS.md, fourth session. A rolling software pipeline, tile k + 1's
                     score MMAs issued before tile k's softmax and output, passed the GPU tests and was 3-11%
                     slower at every shape; so were 18 warps per SM at 112 registers (6 warps x 3 CTAs or
                     9 x 2, via __maxnreg__; 4-23% slower): seventh session, patches in bench/results. Eighth
                     session: 4 warps x 3 CTAs at 168 registers, one score-MMA chain, and the loop unrolled by
                     the ring depth (static slots, block ids from shared memory; 159 SASS per tile vs 173)
                     moved the time by -1%..+3%, within the spread between calls: reverted, patch
                     bench/results/2026-12-03_s8b_variants.patch.)
                     Ninth session: a ring filled by TMA bulk copies (one per tile record, from lane 0, on
                     per-slot mbarriers) and a register ring filled by plain loads (no shared memory; 4 or 8
                     tiles ahead at 168 / 255 registers) passed the GPU tests and were slower at every
                     shape but short batch-1 calls (4-7%): removed, patch
                     bench/results/2026-12-03_s9_load_paths.patch.
                     Thirteenth session: two tiles per step at batch 1 (both tiles' scores, one vote, both
                     outputs; 8 warps, 8-tile rings, one CTA per SM at 180 registers), bit-equal to variant 7
                     and GPU-tested, was no faster (32K b1 14.3 vs 14.1 us): not kept, patch
                     bench/results/2026-12-04_s13e_pair_mode.patch. A relaxed merge arrival with partial slots
                     polled by the last CTA was slower (128K b1 33.5 vs 31.3 us).
                     Eighteenth session (H200-timed 2026-12-05): 10 / 11 = 0 / 4 with paired tiles (group <= 4: tile
                     b's query heads on the MMA columns 4-7 that <= 4 heads leave empty, so the score join, the
                     softmax and the l / offset MMAs run once per two tiles; 129 SASS instructions per tile on
                     the hot path at head_dim 128 instead of 165; two softmax streams per head merged per warp;
                     CPU emulation: tests/kernels/test_cuda_emulation.py). Measured: 7% faster at 128K batch 32
                     (770 vs 826 us), 2-3% slower at batch 1 (fewer warps' worth of independent work per SM).
                     Thirty-seventh session (head_dim 128 only): 12 / 13 = 7 with rings 12 / 10 deep (still two
                     CTAs per SM), 14 = 7 with paired tiles, after 7 (8 deep) beat 4 (4 deep) at 128K batch 1
                     (31.6-32.1 vs 33.3-33.7 us, H100) and at 472+ pairs once the ring was aligned. Thirty-eighth
                     (H100): no faster anywhere measured (128K b1 13 ties 7, 12 +1.2 us; 96K both slower; 14 ties 7
                     and 11 at 256+ pairs): opt-in.
                     Fifty-fourth session (H100): 15 / 16 = 4 / 7 with a ninth warp that ran the end of the call
                     (CTA combine, arrival, merge) as a dry run while the others streamed, so that its code would be
                     in the SM's instruction cache: tests passed, no faster (32K b1 14.0-14.2 vs 14.0-14.1 us; the
                     trace's end steps unchanged; one CTA per SM at 288 threads x 128 registers, so 128K b1 ran
                     2 + 14 splits, 33.8-34.2 vs 30.8-31.2): removed, patch
                     bench/results/2026-12-07_s54b_warmer.patch.
    cta_overhead:    cost of a CTA beyond its tiles (prologue, pipeline fill, partial write), in 16-token
                     INT2 tiles; wave_overhead: the extra cost of each further wave of CTAs (the next
                     CTAs' launch and first loads), merge_cost: the last CTA's cost per split it merges.
                     The three constants of the split-count model (``_choose_int2_splits``), fitted to the
                     H200 split sweeps of the twelfth session at head_dim 128 (BENCHMARKS.md); a head_dim 64
                     sweep (thirteenth session) found the planned count fastest or within 1% at every point.
    min_split_tiles: at least this many 16-token tiles per INT2 split.
    fill_tiles:      where the split model's grid is one wave that leaves each SM's other CTA slots empty and its
                     CTAs would each stream at least this many INT2 tiles, take the splits that fill the slots
                     (``_fill_slots``; 0: never; None: ``FILL_TILES`` of the card and head_dim, on the H100 128 at
                     head_dim 64 and 160 at 128, and 0, the split model's count, on cards where the fill has not been
                     measured). H100, fortieth session, batch 1 (8 KV heads), three rounds, 2 + 31 splits against the
                     model's 2 + 14 (us): 32K 14.9 vs 15.0-15.2, 48K 17.2 vs 18.3, 64K 20.3 vs 21.7-21.9, 80K 23.8 vs
                     25.0 (variant 4); head_dim 64 (variant 11) 32K 10.7 vs 11.1-11.2, 64K 14.0-14.1 vs 15.4-15.5;
                     below the threshold it loses (16K, 77 tiles per CTA: 13.2-13.3 vs 11.9-12.0; batch 2 at 4K:
                     11.3-11.4 vs 10.5-10.6). Through the plan on another H100 (forty-first session): 48K 17.2 vs
                     18.3, 64K 20.3 vs 21.7, head_dim 64 32K 10.6 vs 11.1, head_dim 128 32K 15.2-15.3 vs 14.9-15.1; a
                     third (forty-second): 32K 15.3-15.6 vs 14.9-15.1, 36K 15.5 vs 15.7, 40K 16.2 vs 16.5, head_dim 64
                     32K 10.6 vs 11.1: hence 160 tiles at head_dim 128 (32K's 145 keeps 2 + 14) and 128 at 64. Not
                     measured on the H200 (its twelfth-session sweep, an older kernel without merge slices, had
                     2 + 14 10% faster than 2 + 29 at 32K).
    hp_tiles_per_warp: BF16 sink / recent tiles per warp when the batch leaves room for more hp splits
                     (the hp tier has no load pipeline: each tile a warp takes costs a memory latency).
                     None: 1 while the INT2 tier is short (<= 1024 tiles, 16K tokens: the hp tier is then
                     the critical path, 13.5 -> 10.4 us at 4K batch 1), else 2 (more hp splits would
                     take CTAs from the INT2 tier; H200 diagnosis, 2026-12-03 fourth session).
    early_reads:     with PDL (on by default), read the lengths and block tables, prefetch the BF16 tier
                     into L2 and start the INT2 loads of all but each sequence's newest page *before*
                     waiting for the previous kernel of the stream, so that the call's first memory round
                     trips overlap that kernel's tail (issue 7: the prologue was 2.1 us of a 128K batch-1
                     call). Only safe when the kernel launched right before this one writes none of that
                     data: true for the paged cache's decode step, whose previous kernel is the step's
                     append (it writes BF16 rows and at most the newest INT2 page of a sequence), and for
                     back-to-back decode calls; hence off by default for direct ``decode_attention`` calls.
    l2_evict_first:  load the INT2 records under the L2 evict-first policy (each byte is read once per call,
                     and the lines it would evict, e.g. the model's weights, stay): H200, ninth session, the
                     loads alone 14% faster at 128K batch 32 (760 -> 656 us), the full call 1-3% faster at
                     every measured shape (BENCHMARKS.md); a cache-hint operand, no extra instruction.
    adaptive_splits: True: each sequence runs the BF16-tier and INT2 split counts the plan would pick for its own
                     length (two 64-entry tables over the plan's INT2 length range, DecodeParams::split_lut /
                     hp_lut; at most the plan's counts, so the grid is the plan's), not the ones planned for the
                     longest length the plan allows (a plan made for the pool's capacity, as the paged cache's,
                     so that its decode step can be graph-captured, or a batch mixing long and short sequences);
                     the CTAs a sequence does not use return after reading its length, the splits that run write
                     partial slots 0.. (hp first) and the merge takes only those. False: every split runs. None:
                     True when the planned grid is more than one wave of CTAs. H200, fifteenth session, plans for
                     128K (`bench_decode.py --capacity-plan`, call d; own plan / True / False, us): batch 1 at 4K
                     9.2 / 11.8 / 13.1, 32K 14.4 / 15.3 / 15.4, 128K 31.1 all; batch 8 at 4K 18.1 / 17.9 / 24.0,
                     32K 65.8 / 62.3 / 57.6; batch 32 at 4K 46.1 / 45.8 / 65.7, 32K 207.9 / 215.3 / 239.5, 128K
                     789.3 / 813.0 / 815.2. Hence True by default. Explicit split counts and the cluster variants
                     keep every split.
    poll_merge:      the CTA of partial slot 0 merges the splits, folding each as its flag appears while the
                     others still stream, instead of the last CTA to arrive merging them all; taken only where
                     every CTA of the grid is resident at once (one wave) and a (sequence, KV head) has <= 64
                     splits, so the polling merger cannot starve a split of its SM. The fold follows the order of
                     arrival, so repeated calls agree up to rounding, not bit for bit. Opt-in: H200, thirty-fifth
                     session, slower than the last-CTA merge (128K batch 1 29.3-29.7 vs 29.2-29.3 us, 32K 14.1-14.3
                     vs 13.6): after the last arrival the merger still pays its poll and its fold's round trips.
    merge_slices:    the last n CTAs of a (sequence, KV head) to arrive each merge 1 / n of its outputs (the
                     last one at once, the others after polling its arrival), instead of the last one merging
                     them all: after the last arrival each merger loads 1 / n of the partials. 1..8, or None: 8
                     where a single merger's threads would need a second L2 round trip for the partials (128K
                     batch 1: 33 splits), else 1 (_merge_slices has the H100 measurements: 0.3-0.5 us faster at
                     96K-128K batch 1, 0.4-0.8 us slower at 16K-64K). Taken only where every CTA of the grid is
                     resident at once (one wave of the whole device's slots; the waiting mergers hold
                     theirs; an MPS thread limit scales them: _resident_slots), else 1; pass 1 where the
                     process gets only part of the SMs in another way (green contexts).
    cta_order:       the order in which the grid's CTAs are dispatched: "split" (split-major: every
                     (sequence, KV head)'s split 0, then split 1, ...; the BF16-tier splits first), "sequence"
                     (all splits of a (sequence, KV head) in turn) or None: split-major where the grid is at
                     most 3 waves of CTAs, else sequence-major (``_split_major`` has the measurements).
    """

    variant: int | None = None  # None: DecodePlan's rule (_default_variant: by pairs, tiles, group, card and head_dim)
    cta_overhead: float = 30.0
    wave_overhead: float = 400.0
    merge_cost: float = 0.5
    min_split_tiles: int = 8
    fill_tiles: int | None = None  # None: FILL_TILES by card and head_dim (0 on cards not measured)
    hp_tiles_per_warp: int | None = None
    early_reads: bool = False
    l2_evict_first: bool = True
    adaptive_splits: bool | None = True
    cta_order: str | None = None
    poll_merge: bool = False
    merge_slices: int | None = None


# DecodePlan's variant when the config names none, by the device name's model, the head_dim and, where a key names
# it, the records' scale format (a card without a row for the head_dim takes VARIANT_RULES_DEFAULT): rows (min pairs,
# min INT2 tiles, variant), the first row whose (sequence, KV head) pairs and longest sequence's INT2 tiles (16 tokens)
# reach both minima wins. A paired variant (10, 11, 14) falls back to the single one it pairs where the group is > 4 or
# the library lacks it (a kernel source of OSCARKV_KERNEL_SRC / bench --alt-src may); a row naming another variant the
# library lacks is skipped. Measured at the Qwen3-8B shape (32 query heads, 8 KV heads, group 4).
# H200 (the default; eighteenth session, head_dim 128): 4 below 64 pairs (128K b1 31.5 vs 32.3 us paired), 11 from 64
# (128K b8 192.8 vs 202.4, b16 394.9 vs 432.8), 10 from 256 (128K b32 775.5 against 785.9 for 11, 825.1 for 0). Not
# re-measured since the thirty-sixth session put the ring at shared-address phase 0.
# H100 80GB HBM3, head_dim 128, thirty-seventh session, ring at phase 0, one or two rounds per point
# (bench/results/2026-12-06_s37_variants.log, _s37b_variants.log; the Qwen3-8B shape's INT2 tiles: 16K 1004, 32K 2028,
# 64K 4076, 96K 6124, 128K 8172): 8 pairs: 4 up to 64K (16K 11.7, 32K 14.9, 64K 21.4 us; 7 22.5) and 7 from 96K (96K
# 26.0 vs 26.7, 128K 31.9 vs 33.3); 16 and 32 pairs: 4 (128K b2 59.3-59.6 vs 7 59.7, b4 114.7-118.5 vs 7 123.0); 64
# pairs: 0 at 16K (38.8 vs 41.0 for 4, 41.1 for 11), 4 from 32K (32K b8 61.5 tied with 11, 0 69.2; 64K b8 107.9 vs
# 117.8 for 11; 128K b8 209.6 vs 216.7); 256 pairs: 10 at 16K (125.6-125.9 vs 0 127.1, 11 130.9-131.2) and 32K (224.7,
# 0 224.1, 11 236.7), 0 at 64K (427.3 vs 438.4-438.5 for 10 / 11), 11 at 128K (827.4 vs 835.3 for 0, 842.6 for 10);
# 472 and 1024 pairs: 7 (32K b59 409.7 vs 412.5 for 11, 32K b128 864.5 vs 868.1). 128K b4 (32 pairs) preferred 10
# (112.5 vs 4 114.7-118.5), left at 4 on one point (taken in the fiftieth session, below). Thirty-eighth session: the
# deeper rings 12 / 13 and paired 7 (14) win nowhere (bench/results/2026-12-06_s38_deep_*.log). Fortieth session, 8
# pairs at 2 + 31 splits (the filled slots, CudaDecodeConfig.fill_tiles), three rounds
# (bench/results/2026-12-06_s40c_*.log): 4 at 48K (17.2 vs 19.2-19.4) and 64K (20.3-20.4 vs 21.1-21.2), 7 at 80K (23.4
# vs 23.8): 7 from 4608 tiles (74K) instead of 5120.
# H100 80GB HBM3, head_dim 64, thirty-eighth session, two rounds (bench/results/2026-12-06_s38g_d64_sweep.log,
# _s38h_d64_sweep.log, _s38j_d64_sweep.log; us, the winner against the best other of 0 / 4 / 5 / 7 / 10 / 11): 8 pairs:
# 11 (16K 8.3 vs 9.1, 32K 10.9 vs 11.5, 64K 15.2 vs 15.2 for 5 and 16.7 for 4, 96K 17.6 vs 17.8, 128K 21.6-21.7 vs
# 21.8-22.2); 64 pairs: 11 (32K 38.4 vs 41.9, 128K 126.4-126.8 vs 133.6); 256 pairs: 10 at 16K (77.0-77.2 vs 79.4-79.9
# for 11), 32K (130.9-131.2 vs 137.1-137.8 for 0, 139.1-139.3 for 11) and 64K (252.8 vs 254.5-254.9), 11 at 128K
# (485.6-486.1 vs 500.4); the 10 / 11 boundary between 64K and 128K taken from the head_dim-128 row (96K not measured).
# Not measured at head_dim 64: 400+ pairs.
# Fiftieth session, H100 80GB HBM3, head_dim 128, two rounds each (bench/results/2026-12-07_s50_var_log8_*.log,
# _s50b_var_*.log; us): fp16 records at 32 pairs from 64K: 10 (128K b4 115.5-115.9, 0 115.6, against the old rule's 4
# 121.2-121.5; 64K b4 62.2-62.3 against 4 63.8-64.0), 32K b4 not measured (the thirty-seventh session's 4 stays there).
# log8 records (scale format key "log8"; the rows of fp16 records were 2-8% slower on them between 48K and 112K at
# 8-32 pairs): 8 pairs: 4 to 40K (32K 15.2-15.3, 11 15.3; 40K 17.2, 11 17.1), 11 from 48K to 80K (48K 18.1-18.2 vs 4
# 18.6; 56K 19.3 vs 20.0; 64K 20.7 vs 21.3, 7 22.8; 80K 24.2 tied with 4, 7 25.5), 14 from 96K (96K 26.4 vs 4 27.0, 7
# 28.0; 112K 29.7-30.2 vs 4 30.2-30.3, 7 30.8; 128K 33.7-33.8 tied with 4 and 7, s49f 32.9 vs 7 34.3); 16 pairs: 11 at
# 32K (20.3 vs 4 21.2-21.9, 14 21.3-21.4), 14 from 64K (64K b2 33.8-33.9 vs 4 / 7 34.3-34.4; 128K b2 61.2-61.5 vs 4
# 61.9); 32 pairs: 11 (32K b4 35.8-35.9 vs 14 36.0-36.5, 0 38.1; 64K 62.8-62.9 vs 14 65.7-65.8, 0 67.1; 128K
# 119.3-119.5 vs 4 123.2-126.9, 14 125.7); 64 pairs: 11 at 32K / 64K (62.0 vs 4 63.1-63.4; 111.3-111.4 vs 4
# 112.4-112.8), 4 at 128K (214.5-214.7, 14 214.2-214.6, 11 215.8-217.9), 16K not measured (0 as for fp16); 256 pairs:
# the fp16 rows hold (16K 10 127.1-127.7 vs 0 128.2-128.5; 32K 10 / 0 231.1-231.4; 64K 0 435.0-435.5 vs 10
# 440.9-441.1; 128K 11 834.4-834.6 vs 0 848.8-849.2); 400+ pairs not measured (7 as for fp16); 16-63 pairs below 1536
# tiles (24K) not measured (4 as for fp16).
# Fifty-first session, H100 80GB HBM3, two rounds each (bench/results/2026-12-07_s51_var_*.log; us): fp16 records at 32
# pairs: the fiftieth session's row for 10 began at 4096 tiles, above 64K's 4076, so 64K b4 still ran 4 (s51_plan: 61.0
# us); it begins lower now (2304, below); 7 at 32K b4 (34.5-34.8 vs 4 35.3-35.4, 11 35.1, 14 35.2-35.5, 10 36.1-36.3)
# and 14 at 16K b4 (22.0-22.2 vs 7 22.6-22.9, 0 22.7, 11 22.7-22.8, 4 22.8-23.0). log8 records: 400+ pairs 11 (32K b59
# 417.8-418.5 vs 10 422.1-422.4, 0 424.7-424.9, 7 427.7-429.0; 32K b128 882.8-883.0 vs 10 884.0-884.2, 0 885.5-887.1, 7
# 915.6-917.1); 64 pairs below 1536 tiles 10 (16K b8 39.4-39.5 vs 0 39.9-40.1, 11 41.7-42.0, 4 43.4-43.8). log8 at
# head_dim 64 (32K / 128K x b1 / b8 / b32) agrees with the format-free rows below: 11 (32K b1 11.1-11.2 vs 10 11.9; 128K
# b1 20.9 vs 10 23.2; 32K b8 37.4-37.5 vs 10 41.3-41.4; 128K b8 121.9 vs 10 122.4-123.7), at 256 pairs 10 at 32K
# (122.9-123.0 vs 11 137.2-137.7), 11 at 128K (466.4-469.1 vs 10 469.3-469.8). Then through the plan and two more sweep
# rounds (_s51d_*, _s51e_*; another H100 host): fp16 at 32 pairs 10 from 2304 tiles (36K), not 3072 (48K b4 10 48.0-48.5
# vs 4 48.9-49.3, 7 49.8-50.7; 40K b4 10 41.5 vs 11 42.0-42.2, 4 42.1-42.3, 7 42.7; 64K b4 10 61.8-62.0 vs 4 63.7-64.1);
# fp16 at 400+ pairs keeps 7 (32K b59 423.9-424.1 vs 11 425.1-426.1; b128 897.8-898.1 vs 11 901.4-901.8). log8 at 32
# pairs: 10 at 16K (23.8-24.1 vs 11 24.3-24.6, 14 24.5-25.4, 4 26.4-26.8), 11 from 1536 (40K b4 43.9-44.6, tied with 10
# / 14; 64K b4 62.9 vs 10 64.0-64.1), 10 from 5120 (96K b4 89.2-89.6 vs 11 90.1-90.2; 128K b4 117.3-117.4 vs 11
# 119.0-119.1, 14 125.3-125.4).
VARIANT_RULES = {
    ("H100 80GB HBM3", 128): ((400, 0, 7), (256, 6144, 11), (256, 3072, 0), (256, 0, 10), (64, 1536, 4), (64, 0, 0),
                              (32, 2304, 10), (32, 1536, 7), (32, 0, 14), (16, 0, 4), (0, 4608, 7), (0, 0, 4)),
    ("H100 80GB HBM3", 128, "log8"): ((400, 0, 11), (256, 6144, 11), (256, 3072, 0), (256, 0, 10), (64, 6144, 4),
                                      (64, 1536, 11), (64, 0, 10), (32, 5120, 10), (32, 1536, 11), (32, 0, 10),
                                      (16, 3072, 14), (16, 1536, 11),
                                      (16, 0, 4), (0, 5632, 14), (0, 2560, 11), (0, 0, 4)),
    ("H100 80GB HBM3", 64): ((256, 6144, 11), (256, 0, 10), (0, 0, 11)),
}
VARIANT_RULES_DEFAULT = ((256, 0, 10), (64, 0, 11), (0, 0, 4))


def variant_built(dtype: torch.dtype, head_dim: int, variant: int, sf: int = 0) -> bool:
    """Whether the loaded library has decode ``variant`` for (dtype, head_dim) and scale format ``sf``
    (SCALE_FORMATS; 12-14 are built at head_dim 128 only; a kernel source of OSCARKV_KERNEL_SRC / bench --alt-src
    may lack others)."""
    return lib().oscar_int2_decode_warps(_DT[dtype], head_dim, variant, sf) > 0


def _per_card(table: dict, device_name: str, head_dim: int, default, scale_dtype: str = "float16"):
    """The entry of a per-card table keyed by (device name's model, head_dim) or (model, head_dim, scale format)
    (VARIANT_RULES, FILL_TILES) for this device, head_dim and records' scale format: a key naming the format wins
    over one that names none; ``default`` where neither is there."""
    hits = {k[2] if len(k) > 2 else None: v for k, v in table.items() if k[0] in device_name and k[1] == head_dim}
    return hits.get(scale_dtype, hits.get(None, default))


def _default_variant(pairs: int, group: int, device_name: str, has_variant, i2_tiles: int = 0,
                     head_dim: int = 128, scale_dtype: str = "float16") -> int:
    """DecodePlan's variant when the config names none: the first row of the (card, head_dim[, scale format])'s
    VARIANT_RULES that ``pairs`` and ``i2_tiles`` (the longest sequence's INT2 tiles) reach, as that table's comment
    says."""
    rules = _per_card(VARIANT_RULES, device_name, head_dim, VARIANT_RULES_DEFAULT, scale_dtype)
    for min_pairs, min_tiles, v in rules:
        if pairs < min_pairs or i2_tiles < min_tiles:
            continue
        if v in PAIRED_VARIANTS:
            if group > 4 or not has_variant(v):
                v = PAIRED_VARIANTS[v]
        elif not has_variant(v):
            continue
        return v
    return 4


def _choose_int2_splits(max_tiles: int, bh: int, sms: int, per_sm: int, cfg: CudaDecodeConfig, n_hp: int,
                        max_ns: int) -> int:
    """Split count n of the INT2 tier minimising a model of the launch in units of one CTA's INT2 tile:

        k (ceil(max_tiles / n) + cta_overhead) + (waves - 1) wave_overhead + merge_cost n,
        k = ceil(bh (n + n_hp) / sms) CTAs on the busiest SM, waves = ceil(k / per_sm).

    The CTAs that share an SM share its memory and issue throughput, so the call lasts as long as the busiest
    SM's CTAs take together (a per-SM count: the CTA-slot count of the earlier model called 2 + 29 splits
    at 32K batch 1 one wave of 248 slots, when the SMs that hold two CTAs take twice as long; H200 sweep,
    twelfth session: 2 + 14 splits is 10% faster there, 16K 14%, 4K batch 32 21%)."""
    if max_tiles <= 0:
        return 0
    most = max(1, min(-(-max_tiles // cfg.min_split_tiles), max_ns - n_hp))
    best, best_t = 1, float("inf")
    for n in range(1, most + 1):
        k = -(-bh * (n + n_hp) // sms)
        waves = -(-k // per_sm)
        t = k * (-(-max_tiles // n) + cfg.cta_overhead) + (waves - 1) * cfg.wave_overhead + cfg.merge_cost * n
        if t < best_t - 1e-9:
            best, best_t = n, t
    return best


# CudaDecodeConfig.fill_tiles when the config gives None, by the device name's model and the head_dim: the filled
# slots are measured on the H100 only (fortieth to forty-second sessions); on other cards the split model's count
# stands (the H200's twelfth-session sweep, an older kernel, had 2 + 14 splits 10% faster than 2 + 29 at 32K batch 1).
# head_dim 128 from 160 tiles per CTA: at 32K batch 1 (145 tiles at 2 + 14) 2 + 14 was faster in eight of eleven
# rounds over three hosts (forty-first, forty-second sessions: 14.9-15.1 vs 15.2-15.6 us; fortieth: 2 + 31 by
# 0.1-0.3), at 36K (164 tiles) 2 + 31 by 0.2 (15.5 vs 15.7, two rounds), at 40K by 0.3; head_dim 64 (variant 11) from
# 128: 2 + 31 faster at 32K by 0.4-0.5 us in every round on three hosts.
FILL_TILES = {("H100 80GB HBM3", 128): 160, ("H100 80GB HBM3", 64): 128}


_FILL_MAX_SPLITS = 33  # the most splits per (sequence, KV head) _fill_slots gives: the largest count measured


def _fill_slots(n: int, max_tiles: int, bh: int, slots: int, per_sm: int, sms: int, cfg: CudaDecodeConfig, n_hp: int,
                max_ns: int) -> int:
    """The INT2 split count after ``_choose_int2_splits``' n: where its grid, bh (n_hp + n) CTAs, is one wave that
    puts fewer than per_sm CTAs on its busiest SM and each CTA streams >= cfg.fill_tiles tiles, the count m > n that
    keeps one wave of the ``slots`` CTA slots and gives the busiest SM the fewest tiles, ceil(bh (n_hp + m) / sms)
    ceil(max_tiles / m), if that is fewer than n gives it; else n. (An SM streams faster with its slots filled than
    the model's per-CTA start cost says; measured up to _FILL_MAX_SPLITS splits in all, so not beyond:
    CudaDecodeConfig.fill_tiles.)"""
    def busiest(x: int) -> int:
        return -(-bh * (n_hp + x) // sms) * -(-max_tiles // x)

    if n == 0 or not cfg.fill_tiles or -(-bh * (n + n_hp) // sms) >= per_sm or -(-max_tiles // n) < cfg.fill_tiles:
        return n
    top = min(slots // bh, max_ns, _FILL_MAX_SPLITS) - n_hp
    top = min(top, max_tiles // cfg.min_split_tiles)
    best = n
    for m in range(n + 1, top + 1):
        if busiest(m) < busiest(best):
            best = m
    return best


def _int2_splits(max_tiles: int, bh: int, sms: int, per_sm: int, cfg: CudaDecodeConfig, n_hp: int, max_ns: int,
                 slots: int) -> int:
    """The plan's INT2 split count: the split model's (``_choose_int2_splits``), then ``_fill_slots``."""
    n = _choose_int2_splits(max_tiles, bh, sms, per_sm, cfg, n_hp, max_ns)
    return _fill_slots(n, max_tiles, bh, slots, per_sm, sms, cfg, n_hp, max_ns)


def _choose_hp_splits(hp_tiles: int, i2_tiles: int, bh: int, sms: int, per_sm: int, warps: int,
                      cfg: CudaDecodeConfig) -> int:
    """Split count of the BF16 sink / recent tier: ~hp_tiles_per_warp hp tiles per warp (CudaDecodeConfig); one
    split once the batch alone gives every SM a CTA (H200, twelfth session: 4K batch 32, 1 + 1 splits 45 us vs
    3 + 3 53 us; at 32K and 128K within noise); 0 without hp tiles."""
    if hp_tiles == 0:
        return 0
    per_warp = cfg.hp_tiles_per_warp or (1 if i2_tiles <= 1024 else 2)
    return 1 if bh >= sms else max(1, min(-(-hp_tiles // (per_warp * warps)), -(-per_sm * sms // bh)))


def _split_tables(hp_tiles: int, i2_tiles: int, n_hp: int, n_int2: int, adaptive: bool | None, bh: int, sms: int,
                  per_sm: int, warps: int, cfg: CudaDecodeConfig, max_ns: int,
                  slots: int | None = None) -> tuple[int, list[int], list[int]]:
    """``(lut_tiles, hp_lut, split_lut)``: DecodeParams' tables for a grid of n_hp + n_int2 splits. A
    sequence with ntile INT2 tiles (1 <= ntile <= i2_tiles) runs the first ``hp_lut[e]`` / ``split_lut[e]`` of the
    grid's BF16-tier / INT2 splits, e = min(_LUT - 1, (ntile - 1) // lut_tiles) (0 also for ntile = 0). Entry e
    holds the plan's counts for a sequence of (e + 1) lut_tiles tiles (the top of its range; _choose_hp_splits,
    _int2_splits), capped at the given counts: the grid stays the plan's (a short tier would take more
    BF16-tier splits, and a grid grown by them puts two working CTAs on some SMs of a one-wave batch-1 call:
    H200, fifteenth session, 32K batch 1 15.9 us at 3 + 14 splits against 14.4 at 2 + 14). Not ``adaptive``:
    the given counts everywhere;
    None (CudaDecodeConfig.adaptive_splits): adaptive when the given grid, bh (n_hp + n_int2) CTAs, is more
    than one wave of per_sm x sms."""
    lut_tiles = max(1, -(-i2_tiles // _LUT))
    slots = per_sm * sms if slots is None else slots  # CTA slots this process holds (_resident_slots)
    if adaptive is None:
        adaptive = bh * (n_hp + n_int2) > per_sm * sms
    if not adaptive or n_int2 == 0:
        return lut_tiles, [n_hp] * _LUT, [n_int2] * _LUT
    hp_lut, i2_lut = [], []
    for e in range(_LUT):
        top = min(i2_tiles, (e + 1) * lut_tiles)
        # (shorter INT2 tiers never take fewer BF16-tier splits in _choose_hp_splits, so with the cap hp_lut is
        # n_hp throughout today; the kernel's table stays for planners whose BF16-tier count can shrink)
        h = min(n_hp, _choose_hp_splits(hp_tiles, top, bh, sms, per_sm, warps, cfg))
        hp_lut.append(h)
        i2_lut.append(min(n_int2, max(1, _int2_splits(top, bh, sms, per_sm, cfg, h, max_ns, slots))))
    return lut_tiles, hp_lut, i2_lut


def _split_major(order: str | None, ctas: int, slots: int) -> bool:
    """CudaDecodeConfig.cta_order -> dispatch the grid split-major? None: where the grid is at most 3 waves of
    CTAs. H200, fifteenth session, own plans, two runs each (BENCHMARKS.md): split-major is 3-12% faster at batch
    8 from 4K to 64K (equal at 128K) and 1-5% at batch 32 from 16K to 128K (equal at 4K) (1-3 waves: with the BF16-tier CTAs interleaved, sequence-major dispatch stacks INT2
    CTAs on some SMs), equal at batch 1, and 1-9% slower at batch 128 (4-10 waves, where it runs every BF16-tier
    CTA before the first INT2 one). Plans that leave splits unused in a one-wave grid need it most (fourteenth
    session: a batch-1 plan for 128K run at 32K, sequence-major 19.7 us, own plan 14.5)."""
    if order not in (None, "split", "sequence"):
        raise ValueError(f"CudaDecodeConfig.cta_order={order!r}: use 'split', 'sequence' or None")
    if order is not None:
        return order == "split"
    return ctas <= 3 * slots


_MERGE_KF = 12  # partial outputs a merging thread loads before the weights (int2_paged.cu, KF)


def _resident_slots(per_sm: int, sms: int) -> int:
    """CTA slots this process can count on holding at once, for the merges whose CTAs wait on others of the grid
    (poll merge, merge slices): the device's, scaled by an MPS client's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE where one is
    set (a green context or another partition of the SMs is not visible here: pass merge_slices=1 there)."""
    try:
        pct = float(os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100"))
    except ValueError:
        pct = 100.0
    return int(per_sm * sms * min(max(pct, 0.0), 100.0) / 100.0)


def check_merge_slices(n: int | None) -> None:
    """CudaDecodeConfig.merge_slices must be None or an integer from 1 to 8 (ValueError otherwise; the benchmarks
    call it on their argument before any long work)."""
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 8):
        raise ValueError(f"CudaDecodeConfig.merge_slices={n!r}: use None or an integer from 1 to 8")


def _merge_slices(n: int | None, ctas: int, slots: int, cluster: bool, poll: bool, ns: int = 1, threads: int = 256,
                  outputs: int = 512) -> int:
    """CudaDecodeConfig.merge_slices -> the mergers per (sequence, KV head) the kernel may use: n (None: 8 where one
    merger's threads would load more than _MERGE_KF of ``ns`` splits' partials each, i.e. need a second L2 round
    trip, else 1) where the grid of ``ctas`` CTAs is one wave of ``slots`` (a waiting merger must never hold a slot
    that a CTA it waits for needs) and neither the cluster nor the poll merge runs, else 1. ``threads``: a CTA's
    threads; ``outputs``: the (sequence, KV head)'s group x head_dim outputs. H100, thirty-ninth session (3 rounds,
    us, 1 / 2 / 4 / 8 slices): 128K b1 (33 splits, 17 loads per thread) 31.9 / 31.6 / 31.6 / 31.4, 96K 26.1 / 25.9 /
    25.8 / 25.6; 64K and 32K b1 (16 splits, 8 loads) 21.4 / 21.8 / 22.0 / 22.1 and 14.8 / 15.3 / 15.4 / 15.6."""
    check_merge_slices(n)
    if cluster or poll or ctas > slots:
        return 1
    if n is None:
        items = max(1, outputs // 4)  # float4 outputs
        # the kernel's thread groups: the largest power of two <= min(threads // items, ns) (int2_paged.cu, ngrp)
        groups = 1 if items >= threads else 1 << (min(threads // items, ns).bit_length() - 1)
        loads = -(-ns // groups) * -(-items // (threads // groups))
        n = 8 if loads > _MERGE_KF else 1
    return n


class DecodePlan:
    """Split counts and workspace of one decode step (shared by all layers with the same shapes).

    Made once per step from the step's ``DecodeMeta`` (host maxima); ``run`` is then called per layer.
    """

    def __init__(self, batch: int, num_q_heads: int, num_kv_heads: int, head_dim: int, meta: DecodeMeta,
                 device, dtype=torch.bfloat16, config: CudaDecodeConfig | None = None,
                 n_hp_splits: int | None = None, n_int2_splits: int | None = None, scale_dtype: str = "float16"):
        self.config = config or CudaDecodeConfig()
        if scale_dtype not in SCALE_FORMATS:
            raise InputError(f"scale_dtype must be one of {sorted(SCALE_FORMATS)} for the CUDA kernels, "
                             f"got {scale_dtype!r}")
        self.scale_dtype = scale_dtype  # the records' format (the pools' QuantConfig.scale_dtype), fixed per plan
        sf = SCALE_FORMATS[scale_dtype]
        explicit = n_hp_splits is not None or n_int2_splits is not None
        self.batch, self.hq, self.hkv, self.d = batch, num_q_heads, num_kv_heads, head_dim
        self.group = num_q_heads // num_kv_heads
        self.dtype = dtype
        v = self.config.variant
        if v in PAIRED_VARIANTS and self.group > 4:
            raise ValueError(f"variant {v} pairs tiles on the MMA columns that <= 4 query heads per KV head leave "
                             f"free; this model has {self.group}: use variant {PAIRED_VARIANTS[v]}")
        L = lib()
        dev = torch.device(device)
        props = torch.cuda.get_device_properties(dev)
        if self.config.fill_tiles is None:
            self.config = replace(self.config, fill_tiles=_per_card(FILL_TILES, props.name, head_dim, 0, scale_dtype))
        bh = batch * num_kv_heads  # (sequence, KV head) pairs
        max_hp = meta.max_hp_len if meta.max_hp_len is not None else int(meta.hp_lens.max())
        max_i2 = meta.max_int2_len if meta.max_int2_len is not None else int(meta.int2_lens.max())
        hp_tiles, i2_tiles = -(-max_hp // 16), -(-max_i2 // 16)
        if v is None:
            v = _default_variant(bh, self.group, props.name,
                                 lambda pv: variant_built(dtype, head_dim, pv, sf), i2_tiles, head_dim, scale_dtype)
        self.variant = v
        per_sm = L.oscar_int2_decode_occupancy(_DT[dtype], head_dim, v, sf)
        warps = L.oscar_int2_decode_warps(_DT[dtype], head_dim, v, sf)
        if per_sm <= 0 or warps <= 0:
            raise CudaKernelUnavailable(f"no CUDA decode kernel for dtype={dtype}, head_dim={head_dim}, variant={v}")
        sms = props.multi_processor_count
        # the in-kernel merge keeps NS * group weights in shared memory (NWARP * (8 D - 128) floats)
        max_ns = warps * (8 * head_dim - 128) // self.group
        resident = _resident_slots(per_sm, sms)
        if n_hp_splits is None:
            n_hp_splits = _choose_hp_splits(hp_tiles, i2_tiles, bh, sms, per_sm, warps, self.config)
        if n_int2_splits is None:
            n_int2_splits = _int2_splits(i2_tiles, bh, sms, per_sm, self.config, n_hp_splits, max_ns, resident)
        if n_hp_splits + n_int2_splits == 0:
            n_hp_splits = 1  # nothing cached: one empty split writes zeros
        # cluster variants (8, 9): one cluster of cx CTAs is all the splits of a (sequence, KV head), merged
        # through distributed shared memory (opt-in: see CudaDecodeConfig)
        cx = L.oscar_int2_decode_cluster(_DT[dtype], head_dim, v, sf)
        self.cluster = max(cx, 0)
        if cx > 0:
            if L.oscar_int2_decode_max_clusters(_DT[dtype], head_dim, v, sf) <= 0:
                raise CudaKernelUnavailable(f"variant {v} needs clusters of {cx} CTAs, which this GPU cannot "
                                            "co-schedule; use another variant")
            if n_hp_splits + n_int2_splits != cx:
                if explicit:
                    raise ValueError(f"variant {v} runs exactly {cx} splits per (sequence, KV head) (one cluster); "
                                     f"got {n_hp_splits} + {n_int2_splits}")
                n_hp_splits = min(n_hp_splits, cx - 1)  # the planned hp splits, the rest of the cluster INT2
                n_int2_splits = cx - n_hp_splits
            max_ns = cx
        # per-sequence split counts (CudaDecodeConfig.adaptive_splits), at most the plan's
        self.lut_tiles, self.hp_lut, self.split_lut = _split_tables(
            hp_tiles, i2_tiles, n_hp_splits, n_int2_splits, False if explicit or cx > 0 else self.config.adaptive_splits,
            bh, sms, per_sm, warps, self.config, max_ns, resident)
        # as DecodeParams holds them, built once here rather than in every run (once per layer and step)
        self._luts_c = ((ctypes.c_uint16 * _LUT)(*self.split_lut), (ctypes.c_uint16 * _LUT)(*self.hp_lut))
        if cx > 0 and self.config.cta_order == "split":
            raise ValueError(f"variant {v} launches each (sequence, KV head)'s splits as one cluster, in sequence-major "
                             "order; use cta_order=None or 'sequence' with it")
        self.split_major = int(cx == 0 and _split_major(self.config.cta_order, bh * (n_hp_splits + n_int2_splits),
                                                        per_sm * sms))
        self.n_hp, self.n_int2 = n_hp_splits, n_int2_splits
        ns = n_hp_splits + n_int2_splits
        if ns > max_ns:
            raise ValueError(f"{ns} splits > {max_ns} (the merge's shared-memory bound for group {self.group})")
        self.o_part = torch.empty(bh * ns * self.group * head_dim, dtype=torch.float32, device=dev)
        self.lse_part = torch.empty(bh * ns * self.group, dtype=torch.float32, device=dev)
        # poll merge: every CTA resident at once (one wave) and <= 64 splits (the merger polls them from one warp)
        self.merge_poll = int(bool(self.config.poll_merge) and cx == 0 and ns <= 64 and bh * ns <= resident)
        # the arrival counters, then (poll merge) one flag per partial slot
        self.counters = torch.zeros(bh + (bh * ns if self.merge_poll else 0), dtype=torch.int32, device=dev)
        self.merge_slices = _merge_slices(self.config.merge_slices, bh * ns, resident, cx > 0, bool(self.merge_poll),
                                          ns, warps * 32, self.group * head_dim)

    def run(self, q: torch.Tensor, pool: MixedKVPool, meta: DecodeMeta, sm_scale: float,
            out: torch.Tensor | None = None, _probe: int = 0) -> torch.Tensor:
        """One layer's decode attention. ``_probe`` (benchmarks only; the output is garbage): 1 skips the
        INT2 math (how fast the loads alone stream the cache), 2 returns right after the launch (the
        grid's launch floor), 3 skips the merge (returns after the partial writes), 4 returns after the
        prologue (q, lengths, first block ids), 5 after the tile loop (no epilogue), 6 leaves out the
        code unpack (the MMAs take the raw code words), 7 the INT2 loads after the first ring fill (math only),
        8 times probe 1's loads as plain loads into registers (no shared memory)."""
        B, HQ, D = q.shape
        if (B, HQ, D) != (self.batch, self.hq, self.d) or pool.num_kv_heads != self.hkv:
            raise ValueError(f"q {tuple(q.shape)} / pool heads {pool.num_kv_heads} do not match the plan "
                             f"({self.batch}, {self.hq}, {self.d}) / {self.hkv}; make a new DecodePlan")
        why = unsupported_reason(q, pool)
        if why:
            raise CudaKernelUnavailable(why)
        if pool.k_cfg.scale_dtype != self.scale_dtype:
            raise ValueError(f"the pool's scale_dtype is {pool.k_cfg.scale_dtype!r}, the plan's {self.scale_dtype!r}: "
                             "make the DecodePlan with scale_dtype=pool.k_cfg.scale_dtype")
        if q.stride(-1) != 1:
            q = q.contiguous()
        out = torch.empty_like(q) if out is None else out
        rec_sblk, rec_sh = check_pool_records(pool)
        ht, it = meta.hp_block_tables, meta.int2_block_tables
        assert ht.dtype == torch.int32 and it.dtype == torch.int32 and ht.stride(1) == 1 and it.stride(1) == 1
        p = _DecodeParams(
            q.data_ptr(), q.stride(0), q.stride(1),
            pool.k_codes.data_ptr(), rec_sblk, rec_sh,
            pool.k_hp.data_ptr(), pool.v_hp.data_ptr(), *pool.k_hp.stride()[:3],
            ht.data_ptr(), ht.stride(0), meta.hp_lens.data_ptr(),
            it.data_ptr(), it.stride(0), meta.int2_lens.data_ptr(),
            self.o_part.data_ptr(), self.lse_part.data_ptr(), self.counters.data_ptr(),
            out.data_ptr(), out.stride(0), out.stride(1),
            self.hkv, self.group, self.n_hp, self.n_int2, float(sm_scale * 1.4426950408889634),
            int(self.config.early_reads), int(_probe), int(self.config.l2_evict_first),
            self.lut_tiles, *self._luts_c, self.split_major, self.merge_poll, self.merge_slices,
            *_log8_args(pool, q.device)[1:],
        )
        err = lib().oscar_int2_decode(ctypes.byref(p), B, _DT[q.dtype], D, self.variant,
                                      ctypes.c_void_p(torch.cuda.current_stream(q.device).cuda_stream), _pdl(q.device),
                                      SCALE_FORMATS[self.scale_dtype])
        if err != 0:
            raise RuntimeError(f"oscar_int2_decode failed with CUDA error {err}")
        return out



def _pairs_aligned(x: torch.Tensor) -> bool:
    """Rows of x [R, H, D] (2-byte elements) readable as 32-bit pairs: unit last stride, even other strides."""
    return x.stride(-1) == 1 and x.stride(0) % 2 == 0 and x.stride(1) % 2 == 0 and x.data_ptr() % 4 == 0


def write_kv_cuda(pool: MixedKVPool, k: torch.Tensor, v: torch.Tensor, plan: WritePlan,
                  rotation: torch.Tensor | None = None, q: torch.Tensor | None = None,
                  q_out: torch.Tensor | None = None) -> None:
    """One launch (two when ``plan.fusable`` is False): hp row copies + whole-page quantization into tile16.
    ``rotation`` (checked by ``write_kv``): the new K rows are rotated in the kernel, and ``q`` into ``q_out``."""
    if pool.layout != "tile16" or plan.page_dst is None:
        raise CudaKernelUnavailable("write_kv_cuda needs a tile16 pool and a page-wise plan (MixedKVCache page "
                                    "a multiple of block_size)")
    check_pool_records(pool)
    rows, hkv, d = k.shape
    if k.dtype != pool.k_hp.dtype or v.dtype != pool.k_hp.dtype:
        k, v = k.to(pool.k_hp.dtype), v.to(pool.k_hp.dtype)
    if k.stride(-1) != 1 or v.stride(-1) != 1:
        k, v = k.contiguous(), v.contiguous()
    dev = pool.k_hp.device
    if plan.hp_slots.device != dev:
        plan = plan.to(dev)
    n_pages = plan.page_dst.shape[0]
    p = _AppendParams(
        k.data_ptr(), v.data_ptr(), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        plan.hp_slots.data_ptr(), rows,
        plan.page_dst.data_ptr(), plan.page_src.data_ptr(), n_pages,
        pool.k_codes.data_ptr(), pool.v_codes.data_ptr(), pool.k_codes.stride(0), pool.k_codes.stride(1),
        pool.k_scale.data_ptr(), pool.k_zero.data_ptr(), pool.v_scale.data_ptr(), pool.v_zero.data_ptr(),
        pool.k_scale.stride(0), pool.k_scale.stride(1),
        pool.k_hp.data_ptr(), pool.v_hp.data_ptr(), *pool.k_hp.stride()[:3],
        hkv, kernel_clip_index(pool.k_cfg, d), kernel_clip_index(pool.v_cfg, d), 1, 1,
    )
    if rotation is not None:
        p.rot, p.rot_heads = rotation.data_ptr(), rotation.shape[0]
        # the rotation CTAs read rows as pairs of elements (32-bit loads): even strides, 4-byte aligned rows
        if not _pairs_aligned(k):
            k = k.contiguous()
            p.k, p.k_sr, p.k_sh = k.data_ptr(), k.stride(0), k.stride(1)
        if q is not None:
            if q_out.dtype != pool.k_hp.dtype:  # the kernel writes q_out in the pool's dtype
                raise InputError(f"q_out must have the pool's dtype {pool.k_hp.dtype}, got {q_out.dtype}")
            if q.dtype != k.dtype or not _pairs_aligned(q):
                q = q.to(k.dtype).contiguous()
            p.q, p.q_out, p.q_sr, p.q_sh, p.group = q.data_ptr(), q_out.data_ptr(), q.stride(0), q.stride(1), q.shape[1] // hkv
    p.log8, p.k_top, p.v_top = _log8_args(pool, dev)
    sf = scale_format(pool)
    stream = ctypes.c_void_p(torch.cuda.current_stream(dev).cuda_stream)
    dt = _DT[pool.k_hp.dtype]
    pdl = _pdl(dev)
    if not plan.fusable:  # a new row overwrites an hp slot a page reads: pages first, then rows
        p.do_rows = 0
        err = lib().oscar_append(ctypes.byref(p), dt, d, stream, pdl, sf)
        p.do_rows, p.do_pages = 1, 0
        err = err or lib().oscar_append(ctypes.byref(p), dt, d, stream, pdl, sf)
    else:
        err = lib().oscar_append(ctypes.byref(p), dt, d, stream, pdl, sf)
    if err != 0:
        raise RuntimeError(f"oscar_append failed with CUDA error {err}")
