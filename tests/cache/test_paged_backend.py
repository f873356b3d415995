"""The paged backend (kernels' pools + kernels) equals the reference OscarCache path on CPU: torch
reference kernels always, the Triton kernels under TRITON_INTERPRET=1 (CI sets it)."""

import os

import pytest
import torch

from oscarkv.cache import OscarCache
from oscarkv.errors import InputError, StateError
from oscarkv.kernels import NULL_BLOCK
from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention
from tinymodels import left_pad
from tinymodels import oscar_generate as run

KW = dict(sink=16, recent=16, group_size=32)


def _prompts(lengths=(40, 23, 33), seed=5):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, 100, (1, n), generator=g) for n in lengths]


def paged(config, name, rotations, **kw):
    return OscarCache(config, name, rotations=rotations if name == "oscar" else None, backend="paged", **KW, **kw)


def reference_like(config, cache_paged, rotations):
    """The reference cache with the same method (including the page the paged pools use)."""
    m = cache_paged.method
    return OscarCache(config, m, rotations=rotations if m.name == "oscar" else None)


@pytest.mark.parametrize("name", ["naive", "hadamard", "oscar"])
def test_paged_equals_reference_greedy(model, config, rotations, name):
    ids = _prompts((40,))[0]
    p = paged(config, name, rotations)
    got = run(model, p, ids)
    want = run(model, reference_like(config, p, rotations), ids)
    assert p.segments()["quantized"] > 0
    assert torch.equal(got.sequences, want.sequences)
    assert max((a - b).abs().max() for a, b in zip(got.logits, want.logits)) < 1e-4


def test_absorbed_v_rotation_equals_explicit(model, config, rotations):
    ids = _prompts((40,))[0]
    a = run(model, paged(config, "oscar", rotations), ids, absorb=True)
    b = run(model, paged(config, "oscar", rotations), ids, absorb=False)
    assert torch.equal(a.sequences, b.sequences)
    assert max((x - y).abs().max() for x, y in zip(a.logits, b.logits)) < 1e-4


def test_left_padded_batch_equals_each_row_alone(model, config, rotations):
    prompts = _prompts()
    ids, mask = left_pad(prompts)
    batched = run(model, paged(config, "oscar", rotations), ids, mask)
    for b, pr in enumerate(prompts):
        p = paged(config, "oscar", rotations)
        alone = run(model, reference_like(config, p, rotations), pr)
        assert torch.equal(batched.sequences[b, ids.shape[1]:], alone.sequences[0, pr.shape[1]:]), f"row {b}"
        assert max((lb[b] - la[0]).abs().max() for lb, la in zip(batched.logits, alone.logits)) < 1e-4


def test_sampling_equals_reference(model, config, rotations):
    ids = _prompts((40,))[0]
    p = paged(config, "oscar", rotations)
    torch.manual_seed(3)
    got = run(model, p, ids, do_sample=True, top_k=20, temperature=0.8)
    torch.manual_seed(3)
    want = run(model, reference_like(config, p, rotations), ids, do_sample=True, top_k=20, temperature=0.8)
    assert torch.equal(got.sequences, want.sequences)


def test_pool_runs_out_with_a_clear_error(model, config, rotations):
    ids = _prompts((40,))[0]
    with pytest.raises(StateError, match="max_tokens=48"):
        run(model, paged(config, "naive", None, max_tokens=48), ids)


def test_unsupported_methods_are_refused_before_work(config):
    with pytest.raises(InputError, match="multiples of 16"):
        OscarCache(config, "naive", sink=4, recent=8, backend="paged")
    with pytest.raises(InputError, match="token-wise INT2"):
        OscarCache(config, "kivi", backend="paged", **KW)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="Triton on CPU needs TRITON_INTERPRET=1")
def test_triton_kernels_equal_reference(model, config, rotations):
    prompts = _prompts((37, 21))
    ids, mask = left_pad(prompts)
    p = paged(config, "oscar", rotations, kernel_backend="triton")
    got = run(model, p, ids, mask, max_new_tokens=6)
    q = paged(config, "oscar", rotations, kernel_backend="torch")
    want = run(model, q, ids, mask, max_new_tokens=6)
    assert torch.equal(got.sequences, want.sequences)
    assert max((a - b).abs().max() for a, b in zip(got.logits, want.logits)) < 1e-3


@pytest.mark.parametrize("layout", ["logical", "tile16"])
def test_fixed_buffer_decode_loop_equals_generate(model, config, rotations, layout):
    """oscarkv.cache.graph's loop (the CUDA-graph step, run eagerly on CPU) == model.generate. Its fixed
    buffers are filled by one upload per step from a ring of host slots (cache/paged._StepUpload); 20 steps
    reuse every slot several times, and with tile16 the page lists (page-wise demotion) go through it too."""
    from oscarkv.cache.graph import generate

    prompts = _prompts()
    ids, mask = left_pad(prompts)
    want = run(model, paged(config, "oscar", rotations), ids, mask)
    c = paged(config, "oscar", rotations, max_tokens=64)
    c.paged.layout = layout
    enable_oscar_attention(model, c)
    try:
        toks, logits = generate(model, c, ids, mask, max_new_tokens=20, use_graph=False, return_logits=True)
    finally:
        disable_oscar_attention(model)
    assert torch.equal(toks, want.sequences[:, ids.shape[1]:])
    assert max((a - b).abs().max() for a, b in zip(logits, want.logits)) < 1e-4
    with pytest.raises(StateError, match="max_tokens=64"):
        c2 = paged(config, "oscar", rotations, max_tokens=64)
        enable_oscar_attention(model, c2)
        try:
            generate(model, c2, ids, mask, max_new_tokens=40, use_graph=False)
        finally:
            disable_oscar_attention(model)


def test_auto_backend_stays_reference_on_cpu(model, config, rotations):
    c = OscarCache(config, "oscar", rotations=rotations, **KW)
    enable_oscar_attention(model, c)
    try:
        assert c.paged is None and c.backend == "auto"
        assert model.config._attn_implementation == "oscar_sdpa"
    finally:
        disable_oscar_attention(model)


@pytest.mark.parametrize("absorb", [False, True])
def test_centered_rotations_equal_reference(model, config, rotations, absorb):
    """Exact centering (rotation/centering.py) on the paged path: keys/values stored centered, mu_V added
    back to the output, same as the reference cache."""
    import copy

    rot = copy.copy(rotations)
    g = torch.Generator().manual_seed(9)
    n, h, d = config.num_hidden_layers, config.num_key_value_heads, config.head_dim
    rot.k_mean, rot.v_mean = 0.5 * torch.randn(n, h, d, generator=g), 0.5 * torch.randn(n, h, d, generator=g)
    ids = _prompts((40,))[0]
    p = OscarCache(config, "oscar+center", rotations=rot, backend="paged", **KW)
    assert p.layers[0].plan.centered
    got = run(model, p, ids, absorb=absorb)
    want = run(model, OscarCache(config, p.method, rotations=rot), ids, absorb=absorb)
    assert torch.equal(got.sequences, want.sequences)
    assert max((a - b).abs().max() for a, b in zip(got.logits, want.logits)) < 1e-4
    plain = run(model, paged(config, "oscar", rotations), ids)  # and centering changed something
    assert max((a - b).abs().max() for a, b in zip(got.logits, plain.logits)) > 1e-4


def test_incremental_static_tables_equal_full_metadata():
    """The graph step's tables, updated only where a row's blocks can change, == the manager's metadata."""
    from oscarkv.cache.paged import PagedState
    from oscarkv.methods import make_method

    m = make_method("naive", sink=16, recent=32, group_size=16)
    st = PagedState(m, [m.layer_plan(0, 16)], 1, 16, max_tokens=400)
    st.pad = torch.tensor([0, 37, 5])
    st.allocate(3, torch.device("cpu"), torch.float32, 60)
    st.begin_forward(60)
    st.end_forward()  # planner only: no layer runs here
    st.make_static()
    lens0 = st.row_lengths()
    written = []  # int2 blocks in the step page tables (the CUDA append's page view): one page per row at most
    buckets = set()
    for _ in range(200):
        before = st.row_lengths()
        st.begin_forward(1)
        st.end_forward()
        assert st.static_pos.tolist() == before  # the step's positions, uploaded with the plan
        dst, src = st._static_page_parts
        assert dst.shape[0] == 3  # batch x page / block_size
        real = dst != NULL_BLOCK
        assert (src[~real] == -1).all() and (src[real] >= 0).all()  # padding has no sources; demotions from hp
        # the kernels see the smallest bucket that holds the step's pages (pages first): a view of the table
        assert st.page_buckets() == [0, 1, 2, 3]
        n = int(real.sum())
        assert real[:n].all() and st.page_bucket == min(b for b in st.page_buckets() if b >= n)
        sp = st.static_plan
        assert sp.page_dst.shape[0] == st.page_bucket and sp.page_src.shape == (st.page_bucket, 16)
        if st.page_bucket:  # (an empty view's data_ptr is 0)
            assert sp.page_dst.data_ptr() == dst.data_ptr() and sp.page_src.data_ptr() == src.data_ptr()
        buckets.add(st.page_bucket)
        written += dst[real].tolist()
        full = st.mgr.metadata([0, 1, 2])
        sm = st.static_meta
        for a, b in ((sm.hp_block_tables, full.hp_block_tables), (sm.int2_block_tables, full.int2_block_tables)):
            assert torch.equal(a[:, : b.shape[1]], b) and not a[:, b.shape[1]:].any()
        assert torch.equal(sm.hp_lens, full.hp_lens) and torch.equal(sm.int2_lens, full.int2_lens)
    grown = sum(st.mgr.int2_len(t) - st.mgr.int2_len(t0) for t, t0 in zip(st.row_lengths(), lens0))
    assert written and sorted(written) == sorted(set(written)) and len(written) * 16 == grown  # each new block once
    assert {0, 1} <= buckets  # rows of different lengths demote on different steps


def test_generate_stops_at_eos(model, config, rotations):
    from oscarkv.cache.graph import generate

    ids = _prompts((40,))[0]
    c = paged(config, "naive", None, max_tokens=80)
    enable_oscar_attention(model, c)
    try:
        first = generate(model, c, ids, max_new_tokens=20, use_graph=False)
    finally:
        disable_oscar_attention(model)
    eos = int(first[0, 3])
    c = paged(config, "naive", None, max_tokens=80)
    enable_oscar_attention(model, c)
    try:
        got = generate(model, c, ids, max_new_tokens=20, use_graph=False, eos_token_id=eos)
    finally:
        disable_oscar_attention(model)
    stop = int((first[0] == eos).nonzero()[0]) + 1
    assert torch.equal(got[0], first[0, :stop])


def test_tile16_pool_layout_equals_reference(model, config, rotations):
    """The pool layout the CUDA kernels use (tile16), read and written by the torch reference on CPU."""
    prompts = _prompts()
    ids, mask = left_pad(prompts)
    p = paged(config, "oscar", rotations)  # group 32 == head_dim 32: one scale group per row
    p.paged.layout = "tile16"
    got = run(model, p, ids, mask)
    assert p.paged.pools[0].layout == "tile16"
    q = paged(config, "oscar", rotations)
    want = run(model, q, ids, mask)
    assert q.paged.pools[0].layout == "logical"
    assert torch.equal(got.sequences, want.sequences)
    assert max((a - b).abs().max() for a, b in zip(got.logits, want.logits)) < 1e-4


def test_forward_that_fails_half_way_poisons_the_cache(model, config, rotations, monkeypatch):
    """Issue 11: a write that fails in layer 1 leaves layer 0's rows written and the lengths advanced; the
    cache must refuse every later forward with one clear line instead of attending over half-written rows."""
    import oscarkv.kernels as kernels

    cache = paged(config, "oscar", rotations)
    ids = _prompts((40,))[0]
    run(model, cache, ids, max_new_tokens=2)
    real, calls = kernels.write_kv, []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("simulated kernel failure")
        return real(*a, **k)

    monkeypatch.setattr(kernels, "write_kv", flaky)
    with pytest.raises(RuntimeError, match="simulated"):
        run(model, cache, torch.cat([ids, torch.tensor([[5, 6]])], 1), max_new_tokens=1)
    monkeypatch.setattr(kernels, "write_kv", real)
    with pytest.raises(StateError, match="inconsistent .*create a new OscarCache"):
        run(model, cache, torch.cat([ids, torch.tensor([[5, 6, 7]])], 1), max_new_tokens=1)


def test_refused_forward_changes_nothing(model, config, rotations):
    """A forward refused on the host (cache full) happens before anything is planned: the cache keeps
    working and equals a cache that never saw the refused call."""
    ids = _prompts((40,))[0]
    a = paged(config, "oscar", rotations, max_tokens=48)
    with pytest.raises(StateError, match="full"):
        run(model, a, ids, max_new_tokens=20)  # 40 + 20 > 48: refused at the step that would overflow
    assert a.get_seq_length() == 48 and a.paged.broken is None


def test_graph_refusals_come_before_the_prefill(model, config, rotations):
    """use_graph=True on CPU is refused in one line before any work: the cache stays empty and usable."""
    from oscarkv.cache.graph import generate
    c = paged(config, "oscar", rotations, kernel_backend="torch")
    enable_oscar_attention(model, c)
    try:
        ids = torch.randint(1, config.vocab_size, (1, 12))
        with pytest.raises(InputError, match="CUDA graphs need a CUDA model"):
            generate(model, c, ids, max_new_tokens=2, use_graph=True)
        assert c.get_seq_length() == 0
        assert generate(model, c, ids, max_new_tokens=2).shape == (1, 2)
    finally:
        disable_oscar_attention(model)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback where the CUDA kernels cannot run")
def test_cuda_layout_fallback_is_said_and_a_forced_cuda_backend_refuses(config, rotations):
    """Where the CUDA kernels cannot run (here: no GPU, as on a GPU without nvcc), "auto" picks the Triton
    layout with one warning naming why; a forced kernel_backend="cuda" raises instead of running another."""
    from types import SimpleNamespace

    from oscarkv.cache.paged import PagedState
    from oscarkv.kernels.cuda_ops import CudaKernelUnavailable

    plan = paged(config, "oscar", rotations).method.layer_plan(0, 32, rotations)  # group 32 == head_dim 32
    state = SimpleNamespace(kernel_backend="auto", plans=[plan], head_dim=32)
    with pytest.warns(RuntimeWarning, match="CUDA INT2 kernels cannot run .*CUDA GPU.*Triton"):
        assert PagedState._auto_layout(state, "cuda") == "logical"
    state.kernel_backend = "cuda"
    with pytest.raises(CudaKernelUnavailable, match="CUDA GPU"):
        PagedState._auto_layout(state, "cuda")


@pytest.mark.parametrize("layout", ["logical", "tile16"])
def test_beam_search_equals_reference(model, config, rotations, layout):
    """model.generate(num_beams=3) on a left-padded batch: the paged cache reorders its rows by copying the
    beams' blocks (PagedState.copy_rows) and gives the reference cache's beams and scores."""
    ids, mask = left_pad(_prompts((40, 23)))
    p = paged(config, "oscar", rotations)
    p.paged.layout = layout
    kw = dict(num_beams=3, output_logits=False, output_scores=True)
    got = run(model, p, ids, mask, **kw)
    want = run(model, reference_like(config, p, rotations), ids, mask, **kw)
    assert p.segments()["quantized"] > 0
    assert torch.equal(got.sequences, want.sequences)
    assert (got.sequences_scores - want.sequences_scores).abs().max() < 1e-4


@pytest.mark.parametrize("layout", ["logical", "tile16"])
def test_copied_row_attends_exactly_as_its_source(model, config, rotations, layout):
    """After row 1 takes row 0's blocks, the same next token gives both rows equal logits."""
    from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention

    ids = torch.randint(1, 100, (2, 50), generator=torch.Generator().manual_seed(5))
    p = paged(config, "oscar", rotations)
    p.paged.layout = layout
    run(model, p, ids, torch.ones_like(ids), max_new_tokens=5, output_logits=False)
    n = p.get_seq_length()
    p.reorder_cache(torch.tensor([0, 0]))
    enable_oscar_attention(model, p)
    try:
        with torch.no_grad():
            lg = model(torch.full((2, 1), 7), attention_mask=torch.ones(2, n + 1, dtype=torch.long), cache=p,
                       cache_position=torch.tensor([n])).logits
    finally:
        disable_oscar_attention(model)
    assert p.segments()["quantized"] > 0
    assert torch.equal(lg[0], lg[1])


def test_row_copy_refuses_rows_of_other_lengths(model, config, rotations):
    """Rows of different lengths (different padding) have block lists of different shapes: refused with one
    line, nothing copied; a batch change too."""
    from oscarkv.errors import UnsupportedError

    ids, mask = left_pad(_prompts((40, 23)))
    p = paged(config, "oscar", rotations)
    run(model, p, ids, mask, max_new_tokens=2, output_logits=False)
    before = [t.clone() for t in (p.paged.pools[0].k_hp, p.paged.pools[0].k_codes)]
    with pytest.raises(UnsupportedError, match="row 0 .* cannot take row 1"):
        p.reorder_cache(torch.tensor([1, 1]))
    with pytest.raises(UnsupportedError, match="changing the batch"):
        p.reorder_cache(torch.tensor([0, 1, 1]))
    assert all(torch.equal(a, b) for a, b in zip(before, (p.paged.pools[0].k_hp, p.paged.pools[0].k_codes)))


@pytest.mark.parametrize("layout", ["logical", "tile16"])
def test_reset_cache_serves_the_next_prompt_as_a_new_one(model, config, rotations, layout):
    """reset() empties a paged cache for the next prompt (another batch and length): model.generate and the
    fixed-buffer loop then give exactly what a new cache gives; a GraphDecoder made before refuses to step."""
    from oscarkv.cache.graph import GraphDecoder, generate

    first, mask1 = left_pad(_prompts((40, 23, 33)))
    second, mask2 = left_pad(_prompts((57, 30), seed=9))
    c = paged(config, "oscar", rotations)
    c.paged.layout = layout
    run(model, c, first, mask1)
    enable_oscar_attention(model, c)
    try:
        old = GraphDecoder(model, c, use_graph=False)
    finally:
        disable_oscar_attention(model)
    c.reset()
    assert c.get_seq_length() == 0 and c.paged.mgr is None
    with pytest.raises(StateError, match="reset"):
        old.step(torch.zeros(3, dtype=torch.long))
    fresh = paged(config, "oscar", rotations)
    fresh.paged.layout = layout
    got, want = run(model, c, second, mask2), run(model, fresh, second, mask2)
    assert c.paged.pools[0].layout == layout and c.segments()["quantized"] > 0
    assert torch.equal(got.sequences, want.sequences)
    assert all(torch.equal(a, b) for a, b in zip(got.logits, want.logits))
    c.reset()
    enable_oscar_attention(model, c)
    try:
        toks, logits = generate(model, c, first, mask1, max_new_tokens=20, use_graph=False, return_logits=True)
    finally:
        disable_oscar_attention(model)
    again = run(model, paged(config, "oscar", rotations), first, mask1)
    assert torch.equal(toks, again.sequences[:, first.shape[1]:])
    assert max((a - b).abs().max() for a, b in zip(logits, again.logits)) < 1e-4


@pytest.mark.parametrize("layout", ["logical", "tile16"])
def test_log8_paged_equals_reference(model, config, rotations, layout):
    """scale_dtype="log8" (one byte of scale and one of zero per row, the rotation file's per-layer scale tops):
    the paged pools hold uint8 scale / zero (tile16: records of 8 d + 64 bytes) and the paged cache equals the
    reference cache with the same method, greedy tokens and logits, with left padding."""
    from dataclasses import replace

    L = rotations.num_layers
    rot = replace(rotations, k_scale_top=torch.full((L,), 3.0), v_scale_top=torch.full((L,), 2.0))
    ids, mask = left_pad(_prompts())
    p = paged(config, "oscar", rot, scale_dtype="log8")
    if layout == "tile16":
        p.paged.layout = "tile16"
    got = run(model, p, ids, mask)
    pool = p.paged.pools[0]
    assert pool.layout == layout and pool.k_scale.dtype == torch.uint8 and pool.k_cfg.scale_top == 3
    if layout == "tile16":
        assert pool.k_codes.stride(1) == 8 * 32 + 64
    want = run(model, reference_like(config, p, rot), ids, mask)
    assert p.segments()["quantized"] > 0
    assert torch.equal(got.sequences, want.sequences)
    assert max((a - b).abs().max() for a, b in zip(got.logits, want.logits)) < 1e-4
