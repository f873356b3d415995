"""OSCAR's INT2 mixed KV cache inside vLLM: an attention backend loaded through vLLM's plugin system.

Switch it on with ``OSCAR_KV_ROTATIONS=rot.safetensors`` (a file from ``oscar-kv calibrate`` for the
served model). The ``vllm.general_plugins`` entry point ``oscar_kv`` (pyproject.toml) calls
``register()`` in every vLLM process; without the variable it does nothing. With it, the backend is
registered as ``CUSTOM`` (GPU: ``--attention-backend CUSTOM``) and, on CPU, in place of ``CPU_ATTN``
(the CPU platform ignores the selection). No vLLM file is patched and no model code changes:
K/V are rotated by the file's R_K / R_V and clipped with its ratios inside the backend, q is rotated
by R_K and the output rotated back by R_V^T.

Other variables: ``OSCAR_KV_SINK`` (64), ``OSCAR_KV_RECENT`` (256), ``OSCAR_KV_PAGE`` (16, the window
rule's B), ``OSCAR_KV_MODE`` (``oscar``; ``exact`` = rotation only, no quantization, a correctness
check of the plumbing), ``OSCAR_KV_SHADOW_PAGES`` (cap of the BF16 window pool), ``OSCAR_KV_KERNELS``
(``auto``: the package's Triton append and decode kernels on CUDA where eligible; ``off``: the torch
reference everywhere), ``OSCAR_KV_LAYOUT`` (``auto``, the default: tile16 records that the CUDA decode
kernel reads in place, on a GPU where the format allows, else per-token cells; ``logical``: cells always;
``tile16``: records or an error), ``OSCAR_KV_SCALE_DTYPE`` (``float16``, the default; ``log8``: scale and zero
in one byte each, 8 d + 64 bytes per record of 16 tokens instead of 8 d + 128, with the per-layer scale tops that
``oscar-kv calibrate`` stores in the file; tile16 pages of log8 records are decoded by the CUDA kernel, cells by
the torch reference, the Triton kernels take float scales only). The file decides the recipe (``core.file_recipe``): files fitted for centered rows
(``calibrate --plus``) are served centered through ``rotation/centering.py`` (the one home of that math),
files with Lloyd-Max levels with those levels (on the torch path).

Design of the BF16 sink and recent windows (the open problem of ../shared/vllm-notes.md)
-----------------------------------------------------------------------------------------
vLLM gives a layer one pool of equal pages and each request one block table, and it owns allocation,
prefix sharing, preemption and freeing. Any design that moves tokens between pools behind vLLM's back
(the package's own MixedKVCache demotes ring slots into a second pool) would have to re-implement
those, and a page format of "BF16 for some tokens, INT2 for others" would make every page as large as
a BF16 page, losing the 6x. So:

1. **Every token is written in INT2 into its vLLM page, always** (codes + fp16 scale/zero per token
   and KV head: 40 bytes per token-head at head_dim 64, vs 256 in BF16). vLLM's own accounting
   therefore sizes the cache in INT2 pages, and what vLLM believes is in a block is always there.
2. **The windows are a bounded shadow pool owned by the backend**: model-dtype pages
   ``[pages, H_kv, Bv, d]`` per layer and one mapping ``vLLM block -> shadow page`` shared by the
   layers. Each step the metadata builder maps every block that holds a running request's sink
   positions or recent-window positions *at the request's length after this step* (TEAM decision 1:
   int2_len(t) = B*floor(max(0, t-S-W)/B)); blocks that no running request needs are released but
   stay mapped until their page is reused (LRU), so a prefix-cache hit soon after often finds them.
3. **Invariant: a mapped shadow page holds its block's current rows.** (a) While mapped, every write
   to the block also goes to the shadow (the write path looks the mapping up per token, live or
   not). (b) A new mapping is filled from the block's INT2 rows before this step writes or reads
   (dequantized: rows written while unmapped have lost their BF16 values, so the fill is the best
   value that exists, and it is the block's own). (c) A page leaves a block's mapping only when it is
   reused for another block, and then it is refilled. Hence no request can read another request's
   BF16 rows or stale rows: a reader reaches a shadow only through its own block table, and the shadow
   of a block equals that block. This holds under prefix caching (shared blocks carry identical
   rows, and their shadow follows the block) and preemption (vLLM frees and later rewrites or reuses
   the blocks; a reused block's shadow is either refilled at mapping or kept current by (a)).
   Tested in tests/vllm/test_vllm_core.py (block reuse, eviction, prefix sharing, preemption-style resets)
   and end to end in tests/vllm/test_vllm_e2e.py (real vLLM preemption + prefix caching with every row
   read from the shadow pool gives the stock backend's tokens).
4. **Reads follow the rule per request**: position p of the past is read from the shadow iff
   p < S or p >= S + int2_len(n), else from INT2 codes (dequantized), and the step's own tokens are
   attended unquantized - exactly ``OscarCache.update``'s contract, so the vLLM path and the
   transformers path compute the same thing. Demotion costs nothing: a token leaving the window is
   simply read from its INT2 codes, which were written when the token arrived (token-local format,
   so they are the codes a demotion would produce).

Costs and limits of this design: window tokens are held twice (INT2 in the pages + BF16 in the
shadow), so their INT2 copy adds 16% (40 of 256 bytes per token-head at d = 64) to what a BF16 window
costs anyway; the shadow pool lives outside vLLM's KV budget
(its size is max_num_seqs x the window pages, reported beside the capacity in docs/VLLM.md); window
rows of a prefix-cache hit that were no longer shadowed (the first request had already demoted them,
or their page was reused) are read from INT2 (a small, documented accuracy difference, never a stale
read); B (the demotion page) need not equal vLLM's
block size, but the Triton decode path needs S and B to be multiples of it (else the torch path).
Alternatives considered: a second vLLM KV-cache group for the windows (vLLM's hybrid allocator
supports per-group specs, but its groups are per layer type, not per token range, so a request
cannot place positions 0..63 in one group and 64.. in another); BF16 pages for the first and last
blocks of every request (needs per-block page sizes that vLLM's uniform pool does not have).
"""

from __future__ import annotations

import os

ENTRY_POINT = "oscarkv.integrations.vllm:register"
_registered = False


def register() -> None:
    """vLLM general plugin: register the OSCAR backend when ``OSCAR_KV_ROTATIONS`` is set (idempotent)."""
    global _registered
    from .core import OscarSettings

    s = OscarSettings.from_env()
    if not s.enabled or _registered:
        return
    if not os.path.exists(s.rotations):
        from ...errors import InputError

        raise InputError(f"OSCAR_KV_ROTATIONS={s.rotations} does not exist; create it with "
                         "`oscar-kv calibrate --model MODEL --out rot.safetensors`")
    if s.scale_dtype != "float16":  # log8 pages need the file's scale tops: refuse here, before any engine work
        from ...rotation import RotationSet
        from .core import check_file_for

        check_file_for(s, RotationSet.load(s.rotations))
    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

    register_backend(AttentionBackendEnum.CUSTOM, "oscarkv.integrations.vllm.backend.OscarAttentionBackend")
    try:
        from vllm.platforms import current_platform

        on_cpu = current_platform.is_cpu()
    except Exception:  # pragma: no cover
        on_cpu = False
    if on_cpu:
        register_backend(AttentionBackendEnum.CPU_ATTN, "oscarkv.integrations.vllm.backend.OscarCPUAttentionBackend")
    _clear_selector_cache()
    _registered = True


def _clear_selector_cache() -> None:
    """vLLM memoizes backend selection per process; drop it so a (un)registration takes effect for the
    next engine in this process (only matters when engines with and without OSCAR share a process)."""
    try:
        from vllm.v1.attention import selector

        selector._cached_get_attn_backend.cache_clear()
    except Exception:  # pragma: no cover - a vLLM without this cache
        pass


def unregister() -> None:
    """Undo ``register`` (tests that compare with the stock backend in the same process)."""
    global _registered
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    AttentionBackendEnum.CUSTOM.clear_override()
    AttentionBackendEnum.CPU_ATTN.clear_override()
    _clear_selector_cache()
    _registered = False
