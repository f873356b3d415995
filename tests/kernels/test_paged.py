"""Allocator, window bookkeeping and sequence isolation (torch paths; no Triton needed)."""

import pytest
import torch

from helpers import build

from oscarkv.kernels import (
    NULL_BLOCK,
    BlockAllocator,
    BlockOwnershipError,
    MixedKVCache,
    OutOfBlocksError,
    decode_attention,
    gather_sequence,
)
from oscarkv.errors import StateError
from oscarkv.quant import fake_quantize


def test_allocator_hands_out_distinct_blocks_and_never_the_null_block():
    a = BlockAllocator(10)
    x = a.allocate(4, "a")
    y = a.allocate(5, "b")
    assert NULL_BLOCK not in x + y and len(set(x + y)) == 9 and a.num_free == 0
    with pytest.raises(OutOfBlocksError, match="asked for 1 blocks .* only 0 of 9 are free"):
        a.allocate(1, "c")
    a.free(x, "a")
    assert a.num_free == 4


def test_allocator_refuses_foreign_and_double_free():
    a = BlockAllocator(8)
    x = a.allocate(2, "a")
    a.allocate(2, "b")
    with pytest.raises(BlockOwnershipError, match="owned by 'a'"):
        a.free(x, "b")
    a.free(x, "a")
    with pytest.raises(BlockOwnershipError, match="double free"):
        a.free(x, "a")
    assert a.num_free == 5  # the failed calls changed nothing


def test_plan_append_is_all_or_nothing():
    cache = MixedKVCache(num_int2_blocks=4, num_hp_blocks=32, block_size=4, sink=4, recent=8)
    cache.add("a")
    cache.add("b")
    cache.plan_append(["a"], [20])  # 12 hp tokens + 8 int2 tokens = 2 int2 blocks
    with pytest.raises(OutOfBlocksError, match="int2 pool"):
        cache.plan_append(["a", "b"], [4, 20])  # needs 1 + 2 int2 blocks, 1 free
    assert cache.length("a") == 20 and cache.length("b") == 0
    assert cache.int2_alloc.num_free == 1


def test_padded_page_view_keeps_the_pages_and_pads_with_null_pages():
    """A graph step's fixed page table (WritePlan.pad_pages / fill_page_view): the plan's pages first, then the
    null block with no sources (which the CUDA append skips); a plan larger than the table is refused."""
    cache = MixedKVCache(num_int2_blocks=16, num_hp_blocks=32, block_size=4, sink=4, recent=8)
    cache.add("a")
    plan = cache.plan_append(["a"], [20])  # 2 int2 blocks of new rows
    padded = plan.pad_pages(5)
    n = plan.page_dst.shape[0]
    assert n == 2 and padded.page_dst.shape == (5,) and padded.page_src.shape == (5, 4)
    assert torch.equal(padded.page_dst[:n], plan.page_dst) and torch.equal(padded.page_src[:n], plan.page_src)
    assert (padded.page_dst[n:] == NULL_BLOCK).all() and (padded.page_src[n:] == -1).all()
    assert (plan.page_dst != NULL_BLOCK).all()
    with pytest.raises(StateError, match="fixed page table holds 1"):
        plan.pad_pages(1)


def test_window_lengths_and_block_ownership():
    cache = MixedKVCache(64, 64, block_size=4, sink=8, recent=16, page=1)  # per-token rule
    for s in "abc":
        cache.add(s)
    cache.plan_append(list("abc"), [5, 24, 61])
    for _ in range(7):  # decode steps
        cache.plan_append(list("abc"), [1, 1, 1])
    m = cache.metadata(list("abc"))
    assert m.hp_lens.tolist() == [12, 24, 24] and m.int2_lens.tolist() == [0, 7, 44]
    assert m.max_hp_len == 24 and m.max_int2_len == 44
    owned = {}
    for s in "abc":
        hp, q = cache.blocks(s)
        for b in hp:
            assert cache.hp_alloc.owner(b) == s and ("hp", b) not in owned
            owned["hp", b] = s
        for b in q:
            assert cache.int2_alloc.owner(b) == s and ("q", b) not in owned
            owned["q", b] = s
    # tables list exactly the sequence's blocks, padded with the null block
    for i, s in enumerate("abc"):
        hp, q = cache.blocks(s)
        assert m.hp_block_tables[i, : len(hp)].tolist() == hp
        assert (m.hp_block_tables[i, len(hp) :] == NULL_BLOCK).all()
        assert m.int2_block_tables[i, : len(q)].tolist() == q
    cache.remove("b")
    assert cache.hp_alloc.num_free == 63 - 6 - 3 and cache.int2_alloc.num_free == 63 - 11


@pytest.mark.parametrize("chunks", [1, 3, 40])
@pytest.mark.parametrize("page", [1, 4, 8])
def test_cache_contents_match_the_window_rule(chunks, page):
    """Sink and recent rows are the original BF16 rows; history rows are quantize(row) (same as format.py)."""
    S, W = 8, 16
    lens = [3, 24, 25, 61, 30]
    cache, pool, ids, rows = build(lens, sink=S, recent=W, chunks=chunks, page=page)
    meta = cache.metadata(ids)
    for i, t in enumerate(lens):
        k, v = gather_sequence(pool, meta, i, dtype=torch.float32)
        n = page * (max(0, t - S - W) // page)
        hp_pos = [p for p in range(min(t, S))]
        recent = list(range(S + n, t)) if t > S else []
        # page 1: ring of W slots in slot order; page B: ring listed from the oldest page = position order
        ring = sorted(recent, key=lambda p: (p - S) % W) if page == 1 else recent
        hist = list(range(S, S + n))
        assert k.shape[0] == len(hp_pos) + len(ring) + len(hist) == t
        exp_k = torch.cat([rows[i][0][hp_pos + ring].float(), fake_quantize(rows[i][0][hist].float(), pool.k_cfg)])
        exp_v = torch.cat([rows[i][1][hp_pos + ring].float(), fake_quantize(rows[i][1][hist].float(), pool.v_cfg)])
        assert torch.equal(k, exp_k) and torch.equal(v, exp_v)


def test_sequences_never_read_each_others_blocks():
    cache, pool, ids, _ = build([40, 37], sink=8, recent=16)
    meta = cache.metadata(ids)
    q = torch.randn(2, 4, 64).bfloat16()
    before = decode_attention(q, pool, meta, backend="torch")
    hp, qb = cache.blocks(1)
    for t in (pool.k_hp, pool.v_hp):
        t[hp] = float("nan")
    for t in (pool.k_scale, pool.k_zero, pool.v_scale, pool.v_zero):
        t[qb] = float("nan")
    after = decode_attention(q, pool, meta, backend="torch")
    assert torch.equal(before[0], after[0]) and after[1].isnan().all()


def test_int8_query_is_the_kernels_float32_rule_bit_for_bit():
    """reference.int8_query against an independent oracle of the kernel's prep_q (cuda/int2_paged.cu): numpy
    float32, every step one IEEE-rounded operation (x = q * float32(c), inv = 127 / amax, rint(x * inv)). The
    crafted head has an element at exactly amax / 2 (x * inv lands one ulp from 63.5): the case where torch's
    scalar / tensor (a product with the reciprocal) rounded to 63 and the kernel to 64 (seventeenth session:
    a 1.7e-2 difference on the GPU test's peaked 9000-token row)."""
    import numpy as np

    from oscarkv.kernels.reference import int8_query

    g = torch.Generator().manual_seed(11)
    q = (torch.randn(4, 8, 64, generator=g) * 2).bfloat16()
    q[0, 0] = 0
    q[0, 0, 3], q[0, 0, 5] = 1.0, 0.5  # amax and exactly amax / 2
    q[1, 1, 7] = -q[1, 1].float().abs().max() / 2  # the same from the data (bf16 halves exactly)
    for sm in (0.125, 64**-0.5 * 0.9):
        c = np.float32(sm * 1.4426950408889634)
        x = q.float().numpy() * c
        amax = np.abs(x).max(-1, keepdims=True)
        with np.errstate(divide="ignore"):
            inv = np.where(amax > 0, np.float32(127.0) / amax, np.float32(0.0)).astype(np.float32)
        levels = np.rint(x * inv)
        got = int8_query(q, sm).numpy() * c / np.where(amax > 0, amax / np.float32(127.0), 1)
        assert np.array_equal(np.rint(got), levels), np.argwhere(np.rint(got) != levels)[:5]
    assert float(levels[0, 0, 5]) in (63.0, 64.0)


def test_int8_query_rule_and_its_cost_next_to_int2():
    """reference.int8_query (the CUDA kernel's INT2-tier query): per head a uniform grid of step absmax / 127
    (at most 255 levels, error <= step / 2, zero stays zero); the attention error it adds is a small fraction
    of what the INT2 cache itself costs against BF16 attention (measured < 3% here; bound 6%)."""
    from oscarkv.kernels.reference import attend, decode_attention_torch, int8_query

    g = torch.Generator().manual_seed(4)
    q = torch.randn(3, 8, 128, generator=g) * torch.tensor([0.1, 1.0, 30.0])[:, None, None]
    q[0, 0] = 0
    q8 = int8_query(q, 0.125)
    step = q.abs().amax(-1, keepdim=True) / 127
    assert ((q8 - q).abs() <= step / 2 * (1 + 1e-5) + 1e-12).all()
    assert torch.equal(q8[0, 0], torch.zeros(128))
    levels = (q8 / step.clamp_min(1e-30)).round()
    assert levels.abs().max() <= 127 and torch.allclose(q8, levels * step, rtol=1e-5, atol=1e-7)
    for d in (64, 128):
        cache, pool, ids, rows = build([500, 3000], d=d, hkv=2, bs=16, sink=64, recent=256, layout="tile16", blocks=600)
        meta = cache.metadata(ids)
        q = torch.randn(2, 8, d, generator=g) * 2
        exact = decode_attention_torch(q, pool, meta, compute_dtype=torch.float64)
        rounded = decode_attention_torch(q, pool, meta, compute_dtype=torch.float64, int8_int2_query=True)
        bf16 = torch.cat([attend(q[i : i + 1].double(), r[0].double(), r[1].double(), d**-0.5) for i, r in enumerate(rows)])
        cost_q, cost_int2 = float((rounded - exact).norm()), float((exact - bf16).norm())
        assert 0 < cost_q < 0.06 * cost_int2, (d, cost_q, cost_int2)
