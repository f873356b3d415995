"""Triton kernels against the torch reference (on CPU under TRITON_INTERPRET=1, small sizes).

Tolerances: with fp32 queries every MMA operand is exact (codes 0..3, fp32 under the interpreter), so the
kernel must match the float64 reference to 1e-5. With bf16 queries the output is rounded to bf16
(the interpreter truncates instead of rounding, ~2^-8 relative), so the bound is 6e-3 in relative norm.
On the GPU an fp32 q goes through tf32 MMAs and p * scale through fp16, so the fp32 bound there is 5e-3.
"""

import math

import pytest
import torch

from conftest import requires_triton
from helpers import build, rel_err

from oscarkv.kernels import (
    MixedKVCache,
    MixedKVPool,
    TritonDecodeConfig,
    decode_attention,
    fold_v_rotation_into_o_proj,
    gather_sequence,
    write_kv,
)
from oscarkv.kernels.paged import POOL_TENSORS
from oscarkv.kernels.reference import attend, decode_attention_torch
from oscarkv.quant import QuantConfig
from oscarkv.rotation import hadamard

pytestmark = requires_triton



def _assert_pools_equal(a, b):
    for n in POOL_TENSORS:
        x, y = getattr(a, n), getattr(b, n)
        assert torch.equal(x, y), f"{n} differs"


@pytest.mark.parametrize(
    "d,group,k_clip,chunks",
    [(64, None, 0.96, 1), (64, 16, None, 2), (128, 32, 0.96, 3), (128, 64, 0.9, 1), (128, None, None, 2)],
)
def test_write_kv_matches_reference_bit_for_bit(d, group, k_clip, chunks, device):
    lens = [3, 29, 70]  # shorter than the sink, inside the windows, deep into history (chunk > W too)
    a = build(lens, d=d, group=group, k_clip=k_clip, chunks=chunks, backend="torch", device=device)
    b = build(lens, d=d, group=group, k_clip=k_clip, chunks=chunks, backend="triton", device=device)
    _assert_pools_equal(a[1], b[1])


@pytest.mark.parametrize("d,k_clip,chunks,page", [(64, 0.96, 1, None), (64, None, 3, 1), (128, 0.9, 2, None)])
def test_write_kv_into_tile16_pools_matches_reference(d, k_clip, chunks, page, device):
    """The Triton append writing a tile16 pool row by row (each code to its 2-bit field by atomics: a V word holds
    two tokens' codes, written by two programs of one launch) == the torch reference; chunks write several
    tokens of one block in one launch, page 1 demotes row by row."""
    lens = [3, 29, 70]
    kw = dict(d=d, k_clip=k_clip, chunks=chunks, bs=16, sink=16, recent=16, layout="tile16", page=page, device=device)
    a = build(lens, backend="torch", **kw)
    b = build(lens, backend="triton", **kw)
    _assert_pools_equal(a[1], b[1])
    assert a[1].k_codes.any() and a[1].v_codes.any()


def test_tile16_row_writes_clear_stale_bits(device):
    """Rows written over a reused tile16 block full of stale bits (random bytes), several rows of one block in
    one launch, in random order: every other token's bits stay, the written tokens' bits are the new codes."""
    from oscarkv.kernels.paged import WritePlan

    g = torch.Generator().manual_seed(3)
    pools = [MixedKVPool.allocate(6, 2, 16, 2, 64, QuantConfig(group_size=64), QuantConfig(group_size=64),
                                  layout="tile16", device=device) for _ in range(2)]
    junk = torch.randint(0, 256, pools[0].k_codes.shape, generator=g, dtype=torch.uint8)
    for p in pools:
        p.k_codes.copy_(junk.to(device))
        p.v_codes.copy_(junk.flip(0).to(device))
    slots = (torch.randperm(5 * 16, generator=g)[:37] + 16).to(device)  # blocks 1..5, 37 distinct slots
    k = torch.randn(37, 2, 64, generator=g).bfloat16().to(device)
    v = torch.randn(37, 2, 64, generator=g).bfloat16().to(device)
    none = torch.full((37,), -1, device=device)
    empty = torch.zeros(0, dtype=torch.long, device=device)
    plan = WritePlan(none, slots, empty, empty, True)
    write_kv(pools[0], k, v, plan, backend="torch")
    write_kv(pools[1], k, v, plan, backend="triton")
    _assert_pools_equal(*pools)


def test_decode_steps_with_demotion_match_reference(device):
    """Many single-token steps: each demotes the oldest recent row into INT2 (fused, one launch). The Triton
    append reads its rows as strided views of one fused projection output (as a fused q/k/v_proj gives them;
    the paged cache passes them without a copy), the reference dense copies."""
    ca, pa, ids, _ = build([5, 23, 30], backend="torch", device=device)
    cb, pb, _, _ = build([5, 23, 30], backend="triton", device=device)
    g = torch.Generator().manual_seed(1)
    for _ in range(12):
        qkv = torch.randn(3, 8, 64, generator=g).bfloat16().to(device)  # [rows, 4 q + 2 k + 2 v heads, d]
        k, v = qkv[:, 4:6], qkv[:, 6:8]
        assert not k.is_contiguous() and not v.is_contiguous()
        plan_a, plan_b = ca.plan_append(ids, [1, 1, 1]), cb.plan_append(ids, [1, 1, 1])
        assert plan_b.fusable and torch.equal(plan_a.demote_src, plan_b.demote_src)
        write_kv(pa, k.contiguous(), v.contiguous(), plan_a, backend="torch")
        write_kv(pb, k, v, plan_b, backend="triton")
    _assert_pools_equal(pa, pb)


DECODE_CASES = [
    # d, G (query heads per KV head), lens, group, kernel tuning
    (64, 1, [1, 9, 24, 25], None, {}),                      # shorter than sink / windows only / first INT2 token
    (64, 4, [3, 77, 140], 16, dict(block_n=16, n_int2_splits=3)),  # many blocks, uneven splits, 4 groups
    (64, 8, [131], None, dict(block_n=32, block_n_hp=16, prefetch=False)),
    (128, 4, [50, 201], None, dict(block_n=16)),
    (128, 8, [97, 24, 160], 64, dict(block_n=16, n_int2_splits=5, n_hp_splits=2)),
    (128, 1, [63], 32, {}),
]


@pytest.mark.parametrize("d,G,lens,group,tuning", DECODE_CASES)
def test_decode_matches_reference(d, G, lens, group, tuning, device):
    cache, pool, ids, _ = build(lens, d=d, group=group, device=device, seed=len(lens) + d + G)
    meta = cache.metadata(ids, device=device)
    g = torch.Generator().manual_seed(7)
    q = (torch.randn(len(lens), 2 * G, d, generator=g) * 2).to(device)
    ref = decode_attention_torch(q, pool, meta, compute_dtype=torch.float64)
    cfg = TritonDecodeConfig(**tuning)  # the typed launch knobs of the Triton kernel
    out32 = decode_attention(q, pool, meta, backend="triton", config=cfg)
    assert out32.dtype == torch.float32 and not out32.isnan().any()
    assert rel_err(out32, ref) < (1e-5 if device.type == "cpu" else 5e-3)  # GPU: tf32 q, fp16 p*s
    out16 = decode_attention(q.bfloat16(), pool, meta, backend="triton", config=cfg)
    ref16 = decode_attention_torch(q.bfloat16(), pool, meta, compute_dtype=torch.float64)
    assert out16.dtype == torch.bfloat16 and rel_err(out16, ref16) < 6e-3


def test_decode_empty_batch_rows_give_zero(device):
    cache, pool, ids, _ = build([0, 17], device=device)
    out = decode_attention(torch.randn(2, 4, 64, device=device), pool, cache.metadata(ids, device=device), backend="triton")
    assert torch.equal(out[0], torch.zeros_like(out[0])) and out[1].abs().sum() > 0


@pytest.mark.parametrize("per_head", [False, True])
def test_rotations_inside_and_folded_into_o_proj(per_head, device):
    """q rotated by R_K in the call; output un-rotated by R_V, or R_V folded into o_proj: same result."""
    d, hkv, G = 64, 2, 4
    g = torch.Generator().manual_seed(3)
    H = hadamard(d, dtype=torch.float32)
    perm = lambda: torch.linalg.qr(torch.randn(d, d, generator=g))[0]  # noqa: E731
    r_k = torch.stack([perm() for _ in range(hkv)]) if per_head else perm()
    r_v = torch.stack([perm() for _ in range(hkv)]) if per_head else H
    cache, pool, ids, _ = build([40, 90], d=d, hkv=hkv, device=device)
    meta = cache.metadata(ids, device=device)
    q = torch.randn(2, hkv * G, d, generator=g).to(device)
    out = decode_attention(q, pool, meta, k_rotation=r_k.to(device), v_rotation=r_v.to(device), backend="triton")
    # reference in the model's own space: un-rotate the stored (rotated, dequantized) K and V
    for b in range(2):
        k, v = gather_sequence(pool, meta, b, dtype=torch.float64)
        rk = r_k.double().to(device)
        rv = r_v.double().to(device)
        k = torch.einsum("nhd,hed->nhe", k, rk) if per_head else k @ rk.T
        v = torch.einsum("nhd,hed->nhe", v, rv) if per_head else v @ rv.T
        ref = attend(q[b : b + 1].double(), k, v, 1 / math.sqrt(d))[0]
        assert rel_err(out[b], ref) < (1e-5 if device.type == "cpu" else 5e-3)
    w_o = torch.randn(48, hkv * G * d, generator=g).to(device)
    o_rot = decode_attention(q, pool, meta, k_rotation=r_k.to(device), backend="triton")
    y_folded = o_rot.flatten(1) @ fold_v_rotation_into_o_proj(w_o, r_v.to(device), hkv * G).T
    assert rel_err(y_folded, out.flatten(1) @ w_o.T) < 1e-5


def test_bf16_only_path_is_a_paged_bf16_decode(device):
    """int2_len == 0 everywhere (all tokens in the hp pool): the kernel is a plain paged BF16 decode."""
    d, bs = 64, 4
    pool = MixedKVPool.allocate(4, 64, bs, 2, d, QuantConfig(), QuantConfig(), device=device)
    cache = MixedKVCache(4, 64, bs, sink=0, recent=200)
    cache.add(0)
    cache.add(1)
    plan = cache.plan_append([0, 1], [150, 61])
    k = torch.randn(211, 2, d).bfloat16().to(device)
    v = torch.randn(211, 2, d).bfloat16().to(device)
    write_kv(pool, k, v, plan, backend="triton")
    meta = cache.metadata([0, 1], device=device)
    assert meta.max_int2_len == 0
    q = torch.randn(2, 8, d).to(device)
    out = decode_attention(q, pool, meta, backend="triton", config=TritonDecodeConfig(block_n_hp=16))
    ref = torch.stack([attend(q[i : i + 1].double(), kk.double(), vv.double(), d**-0.5)[0]
                       for i, (kk, vv) in enumerate([(k[:150], v[:150]), (k[150:], v[150:])])])
    assert rel_err(out, ref) < (1e-5 if device.type == "cpu" else 5e-3)
