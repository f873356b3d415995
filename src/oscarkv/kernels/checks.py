"""Checks for the paged API, in functions of their own (the bookkeeping and kernels may be rewritten
around them): a block manager's invariants, checked where they cost nothing at decode time.

Always on (host side, O(batch) Python, no tensor work, no device sync):
    check_known(cache, seq_ids)                 every id was ``add``-ed, no id twice in one batch
    check_append_request(cache, seq_ids, num_new)
                                                counts are integers >= 0, one per sequence
                                                (``plan_append(["B"], [-3])`` left the length at -3)

Opt-in (``validate=True`` on ``decode_attention`` / ``write_kv``, or called directly), because they read
device tensors (one sync) — for tables and plans built by other code (a serving engine, a test):
    check_decode_meta(pool, meta, q=None)       shapes, dtypes, lengths within the tables, every block id
                                                a sequence reads in [1, num_blocks) (-1 read the pool's
                                                last block), no block read by two sequences, host maxima
                                                not below the real lengths
    check_write_plan(pool, plan, k=None, v=None)
                                                slots in range or -1, no slot written twice, a row goes to
                                                one tier only, row counts match
    check_owners(cache, seq_ids, meta=None, plan=None, num_new=None)
                                                the tables / plan rows of each sequence point only at
                                                blocks that sequence owns (another sequence's blocks were
                                                read or overwritten silently)
"""

from __future__ import annotations

import torch

from ..errors import InputError, OscarKVError

# The functions that run on every decode step; bench/bench_validate.py switches exactly these off to
# measure their cost.
HOT_PATH = ("check_known", "check_append_request")


class SequenceError(OscarKVError, KeyError):
    """An unknown or duplicate sequence id."""

    def __str__(self):  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


class TableError(InputError):
    """A block table, length or write plan that would read or write outside what a sequence owns."""


# ----------------------------------------------------------------------------------- host side (always)
def check_known(cache, seq_ids) -> None:
    seqs = cache._seqs
    for sid in seq_ids:
        if sid not in seqs:
            raise SequenceError(f"sequence {sid!r} is unknown; call add({sid!r}) first")
    if len(set(seq_ids)) != len(seq_ids):
        dup = next(s for s in seq_ids if list(seq_ids).count(s) > 1)
        raise SequenceError(f"sequence {dup!r} appears twice in one batch")


def check_append_request(cache, seq_ids, num_new) -> None:
    if len(seq_ids) != len(num_new):
        raise InputError(f"{len(seq_ids)} sequence ids but {len(num_new)} token counts")
    check_known(cache, seq_ids)
    for sid, c in zip(seq_ids, num_new):
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            if isinstance(c, torch.Tensor) and c.numel() == 1 and not c.is_floating_point() and int(c) >= 0:
                continue
            raise InputError(f"token count for sequence {sid!r} must be an integer >= 0, got {c!r}")


# ------------------------------------------------------------------------------ device side (opt-in)
def _int_tensor(name, t, ndim):
    if not isinstance(t, torch.Tensor) or t.ndim != ndim or t.is_floating_point() or t.dtype == torch.bool:
        shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        dt = t.dtype if isinstance(t, torch.Tensor) else ""
        raise TableError(f"{name} must be a {ndim}-D integer tensor, got {shape} {dt}")


def _valid_ids(tables: torch.Tensor, lens: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(row index, block id) of every table entry that a sequence actually reads."""
    nblk = (lens.long() + block_size - 1) // block_size  # [B]
    cols = torch.arange(tables.shape[1], device=tables.device)
    used = cols[None, :] < nblk[:, None]
    rows = torch.arange(tables.shape[0], device=tables.device)[:, None].expand_as(tables)
    return rows[used], tables[used].long()


def check_decode_meta(pool, meta, q: torch.Tensor | None = None) -> None:
    """Refuse tables that would read outside the pool, the null block, or another sequence's blocks."""
    bs = pool.block_size
    tiers = (("hp", meta.hp_block_tables, meta.hp_lens, pool.k_hp.shape[0], meta.max_hp_len),
             ("int2", meta.int2_block_tables, meta.int2_lens, pool.k_codes.shape[0], meta.max_int2_len))
    batch = None
    for tier, tables, lens, nblocks, host_max in tiers:
        _int_tensor(f"{tier}_block_tables", tables, 2)
        _int_tensor(f"{tier}_lens", lens, 1)
        if tables.shape[0] != lens.shape[0]:
            raise TableError(f"{tier}_block_tables has {tables.shape[0]} rows, {tier}_lens {lens.shape[0]}")
        batch = tables.shape[0] if batch is None else batch
        if tables.shape[0] != batch:
            raise TableError(f"hp and int2 tables have different batch sizes ({batch} vs {tables.shape[0]})")
        lens_h = lens.detach().cpu().long()
        if (lens_h < 0).any():
            raise TableError(f"{tier}_lens has a negative length: {lens_h.tolist()}")
        cap = tables.shape[1] * bs
        if (lens_h > cap).any():
            b = int((lens_h > cap).nonzero()[0, 0])
            raise TableError(f"{tier}_lens[{b}] = {int(lens_h[b])} needs more than the table's {tables.shape[1]} blocks of {bs}")
        if host_max is not None and lens_h.numel() and int(lens_h.max()) > host_max:
            raise TableError(f"max_{tier}_len = {host_max} is below the longest {tier} length {int(lens_h.max())}: "
                             "the kernel would skip tokens")
        rows, ids = _valid_ids(tables.detach().cpu(), lens_h, bs)
        bad = (ids < 1) | (ids >= nblocks)
        if bad.any():
            i = int(bad.nonzero()[0, 0])
            raise TableError(f"sequence {int(rows[i])} reads {tier} block {int(ids[i])}, outside [1, {nblocks}) "
                             "(0 is the null block, -1 is not 'none' in a table)")
        uniq, counts = torch.unique(ids, return_counts=True)
        if (counts > 1).any():
            blk = int(uniq[counts > 1][0])
            who = sorted({int(r) for r in rows[ids == blk]})
            raise TableError(f"{tier} block {blk} is read by sequences {who} (or twice by one): "
                             "a block belongs to one sequence")
    if q is not None:
        if q.ndim != 3 or q.shape[0] != batch or q.shape[2] != pool.head_dim or q.shape[1] % pool.num_kv_heads:
            raise TableError(f"q must be [batch={batch}, a multiple of {pool.num_kv_heads} heads, {pool.head_dim}], "
                             f"got {tuple(q.shape)}")


def check_write_plan(pool, plan, k: torch.Tensor | None = None, v: torch.Tensor | None = None) -> None:
    """Refuse a write plan with slots outside the pools, a slot written twice, or rows that do not match."""
    bs = pool.block_size
    n = None
    limits = {"hp_slots": pool.k_hp.shape[0] * bs, "int2_slots": pool.k_codes.shape[0] * bs,
              "demote_src": pool.k_hp.shape[0] * bs, "demote_dst": pool.k_codes.shape[0] * bs}
    host = {}
    for name, lim in limits.items():
        t = getattr(plan, name)
        _int_tensor(f"plan.{name}", t, 1)
        n = t.shape[0] if n is None else n
        if t.shape[0] != n:
            raise TableError(f"plan.{name} has {t.shape[0]} rows, plan.hp_slots {n}")
        h = t.detach().cpu().long()
        bad = (h < -1) | (h >= lim) | ((h >= 0) & (h < bs))  # -1 = none; block 0 is the null block
        if bad.any():
            i = int(bad.nonzero()[0, 0])
            raise TableError(f"plan.{name}[{i}] = {int(h[i])} is outside the pool's slots [{bs}, {lim}) and not -1")
        host[name] = h
    both = (host["hp_slots"] >= 0) & (host["int2_slots"] >= 0)
    if both.any():
        raise TableError(f"plan row {int(both.nonzero()[0, 0])} writes both an hp and an int2 slot")
    for name in ("hp_slots", "int2_slots", "demote_dst"):
        s = host[name][host[name] >= 0]
        u, c = torch.unique(s, return_counts=True)
        if (c > 1).any():
            raise TableError(f"plan.{name} writes slot {int(u[c > 1][0])} more than once")
    dsrc, ddst = host["demote_src"] >= 0, host["demote_dst"] >= 0
    if not torch.equal(dsrc, ddst):
        raise TableError("plan.demote_src and plan.demote_dst must be both set or both -1 in every row")
    for name, t in (("k", k), ("v", v)):
        if t is None:
            continue
        if t.ndim != 3 or t.shape[0] != n or t.shape[1] != pool.num_kv_heads or t.shape[2] != pool.head_dim:
            raise TableError(f"{name} must be [{n} plan rows, {pool.num_kv_heads}, {pool.head_dim}], got {tuple(t.shape)}")


def check_owners(cache, seq_ids, meta=None, plan=None, num_new=None) -> None:
    """The tables (``meta``, batch rows in ``seq_ids`` order) and/or the plan (rows ordered sequence by
    sequence, ``num_new[i]`` rows each) point only at blocks each sequence owns in ``cache``."""
    check_known(cache, seq_ids)
    bs = cache.block_size
    owned = [tuple(set(x) for x in cache.blocks(s)) for s in seq_ids]  # (hp set, int2 set)
    if meta is not None:
        for tier, tables, lens, j in (("hp", meta.hp_block_tables, meta.hp_lens, 0),
                                      ("int2", meta.int2_block_tables, meta.int2_lens, 1)):
            if tables.shape[0] != len(seq_ids):
                raise TableError(f"{tier} tables have {tables.shape[0]} rows for {len(seq_ids)} sequences")
            rows, ids = _valid_ids(tables.detach().cpu(), lens.detach().cpu().long(), bs)
            for r, b in zip(rows.tolist(), ids.tolist()):
                if b not in owned[r][j]:
                    raise TableError(f"sequence {seq_ids[r]!r}'s {tier} table points at block {b}, which it does "
                                     f"not own (owner: {getattr(cache, f'{tier}_alloc').owner(b)!r})")
    if plan is not None:
        if num_new is None or len(num_new) != len(seq_ids):
            raise InputError("check_owners(plan=...) needs num_new, one count per sequence")
        if sum(int(c) for c in num_new) != plan.hp_slots.shape[0]:
            raise TableError(f"the plan has {plan.hp_slots.shape[0]} rows, num_new sums to {sum(num_new)}")
        row_seq = [i for i, c in enumerate(num_new) for _ in range(int(c))]
        for name, j in (("hp_slots", 0), ("int2_slots", 1), ("demote_src", 0), ("demote_dst", 1)):
            for r, slot in enumerate(getattr(plan, name).detach().cpu().tolist()):
                if slot >= 0 and slot // bs not in owned[row_seq[r]][j]:
                    raise TableError(f"plan.{name}[{r}] (sequence {seq_ids[row_seq[r]]!r}) targets block {slot // bs}, "
                                     "which that sequence does not own")
