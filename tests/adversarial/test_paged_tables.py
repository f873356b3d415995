"""Issue 11 item 4: the paged API checks ownership and bounds (host side always, device side with validate=True)."""

import pytest
import torch

from oscarkv.errors import InputError, OscarKVError
from oscarkv.kernels import DecodeMeta, MixedKVCache, MixedKVPool, WritePlan, decode_attention, write_kv
from oscarkv.kernels.checks import TableError, check_decode_meta, check_owners, check_write_plan
from oscarkv.quant import QuantConfig

BS, SINK, RECENT, D, HKV = 4, 4, 8, 32, 2


def _setup(lens=(20, 20), backend="torch"):
    pool = MixedKVPool.allocate(32, 32, BS, HKV, D, QuantConfig(group_size=D), QuantConfig(group_size=D))
    cache = MixedKVCache(32, 32, BS, sink=SINK, recent=RECENT)
    ids = ["A", "B"][: len(lens)]
    for s in ids:
        cache.add(s)
    g = torch.Generator().manual_seed(0)
    kv = torch.randn(sum(lens), HKV, D, generator=g).bfloat16()
    write_kv(pool, kv, kv, cache.plan_append(ids, list(lens)), backend=backend)
    return pool, cache, ids


# ---------------------------------------------------------------------------- host side, always on
@pytest.mark.parametrize("counts, match", [([-3], "must be an integer >= 0, got -3"), ([1.5], "got 1.5"),
                                           (["2"], "got '2'"), ([True], "got True")])
def test_plan_append_bad_counts(counts, match):
    pool, cache, ids = _setup()
    with pytest.raises(InputError, match=match):
        cache.plan_append(["B"], counts)
    assert cache.length("B") == 20  # unchanged


def test_plan_append_unknown_and_duplicate_ids():
    pool, cache, ids = _setup()
    with pytest.raises(OscarKVError, match="sequence 'C' is unknown; call add"):
        cache.plan_append(["C"], [1])
    with pytest.raises(KeyError):  # still a KeyError for callers that catch it
        cache.metadata(["A", "C"])
    with pytest.raises(OscarKVError, match="appears twice|unique"):
        cache.plan_append(["A", "A"], [1, 1])
    with pytest.raises(InputError, match="2 sequence ids but 1 token counts|match num_new"):
        cache.plan_append(["A", "B"], [1])


# ------------------------------------------------------------------------- device side, validate=True
def _meta(cache, ids):
    return cache.metadata(ids)


def test_valid_tables_pass():
    pool, cache, ids = _setup()
    meta = _meta(cache, ids)
    q = torch.randn(2, 4, D)
    check_decode_meta(pool, meta, q)
    check_owners(cache, ids, meta=meta)
    out = decode_attention(q, pool, meta, backend="torch", validate=True)
    assert torch.isfinite(out).all()


def test_table_pointing_at_another_sequence():
    pool, cache, ids = _setup()
    meta = _meta(cache, ids)
    meta.int2_block_tables[1, 0] = meta.int2_block_tables[0, 0]  # B reads A's first int2 block
    with pytest.raises(TableError, match="int2 block .* is read by sequences \\[0, 1\\]"):
        decode_attention(torch.randn(2, 4, D), pool, meta, backend="torch", validate=True)
    one = DecodeMeta(meta.hp_block_tables[1:], meta.hp_lens[1:], meta.int2_block_tables[1:], meta.int2_lens[1:])
    with pytest.raises(TableError, match="sequence 'B'.s int2 table points at block .* which it does not own \\(owner: 'A'\\)"):
        check_owners(cache, ["B"], meta=one)


def test_block_id_minus_one_and_out_of_range():
    pool, cache, ids = _setup()
    meta = _meta(cache, ids)
    meta.hp_block_tables[0, 1] = -1
    with pytest.raises(TableError, match="reads hp block -1, outside \\[1, 32\\)"):
        decode_attention(torch.randn(2, 4, D), pool, meta, backend="torch", validate=True)
    meta = _meta(cache, ids)
    meta.int2_block_tables[1, 0] = 99
    with pytest.raises(TableError, match="int2 block 99"):
        check_decode_meta(pool, meta)
    meta = _meta(cache, ids)
    meta.hp_block_tables[0, 0] = 0
    with pytest.raises(TableError, match="hp block 0"):
        check_decode_meta(pool, meta)


def test_lengths_checked():
    pool, cache, ids = _setup()
    meta = _meta(cache, ids)
    meta.int2_lens[0] = -3
    with pytest.raises(TableError, match="negative length"):
        check_decode_meta(pool, meta)
    meta = _meta(cache, ids)
    meta.hp_lens[1] = 1000
    with pytest.raises(TableError, match="hp_lens\\[1\\] = 1000 needs more than"):
        check_decode_meta(pool, meta)
    meta = _meta(cache, ids)
    meta.max_hp_len = 1
    with pytest.raises(TableError, match="max_hp_len = 1 is below"):
        check_decode_meta(pool, meta)
    with pytest.raises(TableError, match="q must be"):
        check_decode_meta(pool, _meta(cache, ids), torch.randn(3, 4, D))


def test_write_plan_aimed_at_another_sequence():
    pool, cache, ids = _setup()
    plan = cache.plan_append(["B"], [1])
    a_hp, _ = cache.blocks("A")
    bad = WritePlan(torch.where(plan.hp_slots >= 0, torch.full_like(plan.hp_slots, a_hp[0] * BS), plan.hp_slots),
                    plan.int2_slots, plan.demote_src, plan.demote_dst, plan.fusable)
    with pytest.raises(TableError, match="sequence 'B'\\) targets block .* which that sequence does not own"):
        check_owners(cache, ["B"], plan=bad, num_new=[1])
    check_owners(cache, ["B"], plan=plan, num_new=[1])


@pytest.mark.parametrize("field, value, match", [
    ("hp_slots", -5, "plan.hp_slots\\[0\\] = -5 is outside"),
    ("int2_slots", 10_000, "plan.int2_slots\\[0\\] = 10000"),
    ("hp_slots", 1, "= 1 is outside the pool's slots \\[4,"),  # the null block
])
def test_write_plan_bounds(field, value, match):
    pool, cache, ids = _setup()
    plan = cache.plan_append(["B"], [1])
    t = getattr(plan, field).clone()
    t[0] = value
    bad = WritePlan(**{**{f: getattr(plan, f) for f in ("hp_slots", "int2_slots", "demote_src", "demote_dst", "fusable")},
                       field: t})
    kv = torch.randn(1, HKV, D).bfloat16()
    before = pool.k_hp.clone()
    with pytest.raises(TableError, match=match):
        write_kv(pool, kv, kv, bad, backend="torch", validate=True)
    assert torch.equal(before, pool.k_hp)  # nothing written


def test_write_plan_rows_and_duplicates():
    pool, cache, ids = _setup()
    plan = cache.plan_append(["A", "B"], [1, 1])
    with pytest.raises(TableError, match="k must be \\[2 plan rows"):
        check_write_plan(pool, plan, torch.randn(3, HKV, D))
    dup = WritePlan(plan.hp_slots.clone(), plan.int2_slots, plan.demote_src, plan.demote_dst, plan.fusable)
    dup.hp_slots[1] = dup.hp_slots[0]
    with pytest.raises(TableError, match="more than once"):
        check_write_plan(pool, dup)


def test_demotion_into_another_sequences_block():
    pool, cache, ids = _setup(lens=(30, 30))
    for _ in range(3 * BS):  # step until this step demotes (page-wise rules demote every B steps)
        plan = cache.plan_append(["A", "B"], [1, 1])
        if (plan.demote_src >= 0).any():
            break
    else:
        pytest.fail("no demotion happened")
    check_owners(cache, ["A", "B"], plan=plan, num_new=[1, 1])  # the real plan is fine
    i = next(j for j, d in enumerate(plan.demote_dst.tolist()) if d >= 0 and cache.int2_alloc.owner(d // BS) == "A")
    _, b_int2 = cache.blocks("B")
    dst = plan.demote_dst.clone()
    dst[i] = b_int2[0] * BS + 3  # A's token demoted into B's block
    bad = WritePlan(plan.hp_slots, plan.int2_slots, plan.demote_src, dst, plan.fusable)
    with pytest.raises(TableError, match="may only demote its own tokens"):
        check_owners(cache, ["A", "B"], plan=bad, num_new=[1, 1])
