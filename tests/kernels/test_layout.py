"""tile16 pool layout (CUDA kernel order) vs the logical format, and the page-wise window rule: CPU, in CI."""

import pytest
import torch

from helpers import build

from oscarkv.kernels import MixedKVCache, MixedKVPool, convert_pool, decode_attention, gather_sequence, write_kv
from oscarkv.kernels.layout import (
    _field_maps,
    codes_from_tile16,
    codes_to_tile16,
    scales_from_tile16,
    scales_to_tile16,
)
from oscarkv.quant import QuantConfig

POOL_INT2 = ("k_codes", "k_scale", "k_zero", "v_codes", "v_scale", "v_zero")


@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("which", ["k", "v"])
def test_tile16_transform_is_a_bijection(d, which):
    g = torch.Generator().manual_seed(d)
    codes = torch.randint(0, 256, (3, 2, 16, d // 4), generator=g, dtype=torch.uint8)
    t = codes_to_tile16(codes, which)
    assert t.shape == codes.shape and not torch.equal(t, codes)
    assert torch.equal(codes_from_tile16(t, which), codes)
    for fmap in _field_maps(d):  # every (token, dim) exactly once
        assert torch.equal(fmap.sort().values, torch.arange(16 * d))
    s = torch.randn(3, 2, 16, 1, generator=g)
    assert torch.equal(scales_from_tile16(scales_to_tile16(s, which), which), s)
    if which == "k":
        assert scales_to_tile16(s, which)[0, 0, 1, 0] == s[0, 0, 8, 0]  # stored order 0, 8, 1, 9, ...
    else:
        assert scales_to_tile16(s, which)[0, 0, 2, 0] == s[0, 0, 8, 0]  # stored order 0, 1, 8, 9, 2, ...


def test_tile16_fragment_order_by_hand():
    """d = 64, lane 5 (g=1, t=1) owns bytes [40, 48). K: word 0 byte j field P = token 1, dim 16P + 4 + j; word 1
    = token 9. V: word 0 bits 2-3 (read as is, half 0, P=1) = token 2t = 2, dim g = 1."""
    d = 64
    from oscarkv.quant import pack_codes

    codes = torch.zeros(16, d, dtype=torch.uint8)
    codes[1, 4], codes[1, 39], codes[9, 5] = 1, 2, 3  # (w0 j0 P0), (w0 j3 P2), (w1 j1 P0)
    t = codes_to_tile16(pack_codes(codes, 2), "k").flatten()
    w0, w1 = (int.from_bytes(bytes(t[40 + 4 * w : 44 + 4 * w].tolist()), "little") for w in range(2))
    assert w0 & 3 == 1 and (w0 >> 28) & 3 == 2 and (w1 >> 8) & 3 == 3
    assert bin(w0).count("1") == 2 and bin(w1).count("1") == 2
    codes = torch.zeros(16, d, dtype=torch.uint8)
    codes[2, 1] = 2
    t = codes_to_tile16(pack_codes(codes, 2), "v").flatten()
    assert int.from_bytes(bytes(t[40:44].tolist()), "little") == 2 << 2


@pytest.mark.parametrize("d", [64, 128])
def test_tile16_code_weights_follow_head_dim(d):
    """V: the kernel's fp16 operand of a field is 1024 + 4^P c with P fixed by the field's bit position, and
    every field of one head_dim index has the same P (4^-P is undone per output row). K: field P of a byte (the
    u8 operand 4^P c once masked) holds the dims [(d/4) P, (d/4)(P + 1)) that the MMA of P multiplies."""
    from oscarkv.kernels.layout import _bit, code_weight_exponent

    where = {_bit(s, e, P) // 2: P for s in range(2) for e in range(2) for P in range(1, 5)}
    assert sorted(where) == list(range(16))
    k_map, v_map = _field_maps(d)
    for f, flat in enumerate(v_map.tolist()):
        assert where[f % 16] == code_weight_exponent(flat % d)
    for f, flat in enumerate(k_map.tolist()):
        assert (flat % d) // (d // 4) == f % 4


def _emulate_unpack(word: int, s: int, e: int, P: int) -> int:
    """What the kernel computes on the V side: (word rotated right by 8 s) & (3 << 2P) in half e, ORed under
    0x6400; returns the fp16 value minus 1024."""
    w = word if s == 0 else ((word >> 8) | (word << 24)) & 0xFFFFFFFF
    half = (w >> (16 * e)) & 0xFFFF
    return ((half >> (2 * P)) & 3) * 4**P


@pytest.mark.parametrize("d", [64, 128])
def test_tile16_emulated_kernel_operands_read_the_right_codes(d):
    g = torch.Generator().manual_seed(3)
    plain = torch.randint(0, 4, (16, d), generator=g, dtype=torch.uint8)
    from oscarkv.kernels.layout import code_weight_exponent
    from oscarkv.quant import pack_codes

    nw = d // 32
    kt = codes_to_tile16(pack_codes(plain, 2), "k").flatten()
    vt = codes_to_tile16(pack_codes(plain, 2), "v").flatten()
    word = lambda t, lane, w: int.from_bytes(bytes(t[(lane * nw + w) * 4 : (lane * nw + w) * 4 + 4].tolist()), "little")  # noqa: E731
    for lane in (0, 5, 18, 31):
        gg, tt = lane >> 2, lane & 3
        for w in range(nw):
            kw, vw = word(kt, lane, w), word(vt, lane, w)
            for P in range(4):  # K: the u8 operand bytes of the MMA of field P (word & 0x03030303 << 2P)
                masked = kw & (0x03030303 << (2 * P))
                for j in range(4):
                    tok, dim = gg + 8 * (w & 1), (d // 4) * P + 16 * (w >> 1) + 4 * tt + j
                    assert (masked >> (8 * j)) & 0xFF == int(plain[tok, dim]) * 4**P
            for s in range(2):
                for e in range(2):
                    for P in range(1, 5):
                        u, x = (P - 1) >> 1, (P - 1) & 1
                        tok, dim = 2 * tt + 8 * s + e, 16 * (2 * w + u) + 8 * x + gg
                        assert code_weight_exponent(dim) == P
                        assert _emulate_unpack(vw, s, e, P) == int(plain[tok, dim]) * 4**P


def _pair(lens, chunks, d=64, hkv=2, seed=0, steps=0, scale_dtype="float16"):
    """The same writes into a logical pool and a tile16 pool (torch reference), plus decode steps."""
    kw = dict(d=d, hkv=hkv, bs=16, sink=16, recent=32, chunks=chunks, seed=seed, group=None, scale_dtype=scale_dtype)
    ca, pa, ids, _ = build(lens, **kw)
    cb, pb, _, _ = build(lens, **kw, layout="tile16")
    g = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        k = torch.randn(len(lens), hkv, d, generator=g).bfloat16()
        v = torch.randn(len(lens), hkv, d, generator=g).bfloat16()
        write_kv(pa, k, v, ca.plan_append(ids, [1] * len(lens)))
        write_kv(pb, k, v, cb.plan_append(ids, [1] * len(lens)))
    return ca, pa, pb, ids


@pytest.mark.parametrize("chunks,steps,scale_dtype", [(1, 0, "float16"), (3, 20, "float16"), (40, 5, "float16"),
                                                      (3, 20, "log8")])
def test_tile16_pool_is_the_logical_pool_transformed(chunks, steps, scale_dtype):
    ca, pa, pb, ids = _pair([5, 49, 70, 133], chunks, steps=steps, scale_dtype=scale_dtype)
    assert pb.k_scale.dtype == (torch.uint8 if scale_dtype == "log8" else torch.float16)
    conv = convert_pool(pa, "tile16")
    for n in POOL_INT2 + ("k_hp", "v_hp"):
        assert torch.equal(getattr(conv, n), getattr(pb, n)), n
    back = convert_pool(pb, "logical")
    for n in POOL_INT2:
        assert torch.equal(getattr(back, n), getattr(pa, n)), n
    meta = ca.metadata(ids)
    for i in range(len(ids)):
        ka, va = gather_sequence(pa, meta, i)
        kb, vb = gather_sequence(pb, meta, i)
        assert torch.equal(ka, kb) and torch.equal(va, vb)
    q = torch.randn(len(ids), 4, 64)
    assert torch.equal(decode_attention(q, pa, meta, backend="torch"), decode_attention(q, pb, meta, backend="torch"))


@pytest.mark.parametrize("d,scale_dtype", [(64, "float16"), (128, "float16"), (128, "log8"), (64, "log8")])
def test_tile16_records_partition_one_tensor(d, scale_dtype):
    """A tile16 pool's six INT2 tensors are views that tile one uint8 tensor exactly, one contiguous record
    per (block, KV head) in the decode kernel's order (no gap, no overlap); convert_pool builds the same.
    Records of 8 d + 128 bytes (fp16 scale / zero) or 8 d + 64 (log8)."""
    from oscarkv.kernels.cuda_ops import check_pool_records

    top = {"scale_top": 0} if scale_dtype == "log8" else {}
    kc = QuantConfig(group_size=d, clip_ratio=0.96, scale_dtype=scale_dtype, **top)
    vc = QuantConfig(group_size=d, clip_ratio=0.92, scale_dtype=scale_dtype, **top)
    sb = 1 if scale_dtype == "log8" else 2
    pool = MixedKVPool.allocate(9, 9, 16, 2, d, kc, vc, layout="tile16")
    for p in (pool, convert_pool(MixedKVPool.allocate(9, 9, 16, 2, d, kc, vc), "tile16")):
        base = p.k_codes.untyped_storage().data_ptr()
        spans = [(getattr(p, n).data_ptr() - base, getattr(p, n)[0, 0].numel() * getattr(p, n).element_size())
                 for n in ("k_codes", "v_codes", "k_scale", "k_zero", "v_scale", "v_zero")]
        assert spans[0][0] == 0 and all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:]))  # in this order
        record = spans[-1][0] + spans[-1][1]
        assert record == 8 * d + 4 * 16 * sb and p.k_codes.stride()[:2] == (2 * record, record)
        assert p.k_codes.untyped_storage().nbytes() == 9 * 2 * record
        check_pool_records(p)
    from dataclasses import replace

    sep = replace(pool, v_codes=pool.v_codes.clone())
    with pytest.raises(ValueError, match="v_codes is not in the tile16 record layout"):
        check_pool_records(sep)
    c32 = QuantConfig(group_size=d, scale_dtype="float32")  # records of another scale width: not the kernels'
    wide = MixedKVPool.allocate(4, 4, 16, 2, d, c32, c32, layout="tile16")
    assert wide.k_codes.stride(1) == 8 * d + 4 * 16 * 4
    with pytest.raises(ValueError, match="scale_dtype in"):
        check_pool_records(wide)


def test_tile16_needs_block_size_16():
    with pytest.raises(ValueError, match="tile16"):
        MixedKVPool.allocate(4, 4, 8, 1, 64, QuantConfig(), QuantConfig(), layout="tile16")


def test_page_rule_lengths_and_prefix_tables():
    """int2_len(t) = B floor(max(0, t - S - W) / B); the valid hp tokens are a prefix of the hp table."""
    S, W, B = 16, 32, 16
    cache = MixedKVCache(256, 256, 16, sink=S, recent=W)
    cache.add(0)
    cache.plan_append([0], [3])
    for t in range(4, 200):
        plan = cache.plan_append([0], [1])
        n = B * (max(0, t - S - W) // B)
        assert cache.int2_len(t) == n and cache.hp_len(t) == t - n
        # demotion of one whole page exactly when int2_len grows
        grew = n > B * (max(0, t - 1 - S - W) // B)
        assert plan.demote_src.numel() == (B if grew else 0) and plan.fusable
        assert plan.page_dst.numel() == (1 if grew else 0)
        m = cache.metadata([0])
        assert int(m.hp_lens[0]) == t - n and int(m.int2_lens[0]) == n
        assert W <= t - S - n < W + B or t < S + W


def test_page_one_is_the_per_token_rule():
    cache = MixedKVCache(64, 64, block_size=4, sink=8, recent=16, page=1)
    for s in "abc":
        cache.add(s)
    cache.plan_append(list("abc"), [5, 24, 61])
    for _ in range(7):
        cache.plan_append(list("abc"), [1, 1, 1])
    m = cache.metadata(list("abc"))
    assert m.hp_lens.tolist() == [12, 24, 24] and m.int2_lens.tolist() == [0, 7, 44]


def test_cuda_backend_refuses_clearly_without_a_gpu_or_tile16():
    from oscarkv.kernels import CudaKernelUnavailable
    from oscarkv.kernels.cuda_ops import CudaDecodeConfig, _choose_int2_splits

    cache, pool, ids, _ = build([40], d=64, bs=16, sink=16, recent=16, layout="tile16")
    with pytest.raises(CudaKernelUnavailable, match="CUDA"):
        decode_attention(torch.randn(1, 4, 64), pool, cache.metadata(ids), backend="cuda")
    # split model: never more splits than tiles / min_split_tiles nor than the merge bound
    for tiles, bh in [(0, 8), (5, 8), (8192, 8), (8192, 256), (100000, 1)]:
        n = _choose_int2_splits(tiles, bh, 132, 3, CudaDecodeConfig(), 3, 64)
        assert (n == 0) == (tiles == 0) and n <= max(1, tiles // 8) and n <= 61


def test_cta_order_is_split_major_for_grids_of_at_most_three_waves():
    """CudaDecodeConfig.cta_order (CPU): None picks split-major up to 3 waves of CTAs, explicit orders win, and a
    misspelt order is refused in one line naming the choices."""
    from oscarkv.kernels.cuda_ops import _split_major

    assert _split_major(None, 264, 264) and _split_major(None, 3 * 528, 528) and not _split_major(None, 3 * 528 + 1, 528)
    assert _split_major("split", 10**6, 528) and not _split_major("sequence", 8, 528)
    with pytest.raises(ValueError, match="cta_order='splits': use 'split', 'sequence' or None"):
        _split_major("splits", 8, 528)


def test_split_tables_give_each_length_the_plans_counts():
    """DecodeParams::split_lut / hp_lut (CPU): a sequence of ntile INT2 tiles runs the plan's BF16-tier and INT2
    split counts for the top of its 1/64 of the plan's range, capped at the plan's counts (the grid stays the
    plan's, although a short INT2 tier would take more BF16-tier splits); constant tables when not adaptive;
    None adapts only grids of more than one wave."""
    from oscarkv.kernels.cuda_ops import _LUT, CudaDecodeConfig, _choose_hp_splits, _int2_splits, _split_tables

    cfg = CudaDecodeConfig()
    for i2, hp, bh in [(8192, 20, 8), (4076, 20, 8), (8192, 20, 256), (2048, 20, 16), (100, 4, 1), (70, 0, 3), (1, 20, 8)]:
        h0 = _choose_hp_splits(hp, i2, bh, 132, 2, 8, cfg)
        n0 = _int2_splits(i2, bh, 132, 2, cfg, h0, 200, 264)
        lt, hl, il = _split_tables(hp, i2, h0, n0, True, bh, 132, 2, 8, cfg, 200, 264)
        assert len(hl) == len(il) == _LUT
        assert hl[-1] == h0 and il[-1] == n0  # the top of the range: the plan for the maxima
        assert all(1 <= x <= n0 for x in il) and all((x >= 1) == (hp > 0) and x <= h0 for x in hl)
        for ntile in {1, 7, max(1, i2 // 3), i2}:
            e = min(_LUT - 1, (ntile - 1) // lt)
            top = min(i2, (e + 1) * lt)
            h = min(h0, _choose_hp_splits(hp, top, bh, 132, 2, 8, cfg))
            want = (h, min(n0, max(1, _int2_splits(top, bh, 132, 2, cfg, h, 200, 264))))
            assert (hl[e], il[e]) == want, (i2, bh, ntile)
    # 128K batch 1 (Qwen3-8B shape, variant 4): 4K rows would take 3 BF16-tier splits (one hp tile per warp while
    # the INT2 tier is short), 128K rows 2; the grid stays 2 + 31 and the 4K rows run 2 + 14
    h0 = _choose_hp_splits(20, 8192, 8, 132, 2, 8, cfg)
    n0 = _int2_splits(8192, 8, 132, 2, cfg, h0, 200, 264)
    lt, hl, il = _split_tables(20, 8192, h0, n0, True, 8, 132, 2, 8, cfg, 200)
    assert (h0, n0, hl[(256 - 1) // lt], il[(256 - 1) // lt]) == (2, 31, 2, 14)
    assert _split_tables(20, 8192, 2, 31, False, 8, 132, 2, 8, cfg, 200)[1:] == ([2] * _LUT, [31] * _LUT)
    assert _split_tables(20, 0, 1, 0, True, 8, 132, 2, 8, cfg, 200)[1:] == ([1] * _LUT, [0] * _LUT)
    assert _split_tables(20, 8192, 2, 31, None, 8, 132, 2, 8, cfg, 200)[2] == [31] * _LUT  # 264 CTAs: one wave
    h0 = _choose_hp_splits(20, 8192, 256, 132, 2, 8, cfg)
    n0 = _int2_splits(8192, 256, 132, 2, cfg, h0, 200, 264)
    assert min(_split_tables(20, 8192, h0, n0, None, 256, 132, 2, 8, cfg, 200)[2]) < n0


def test_merge_slices_only_in_one_wave_grids_and_bad_values_refused():
    """CudaDecodeConfig.merge_slices -> the kernel's mergers: the setting where the grid is one wave of CTAs and no
    cluster or poll merge runs (a merger that waits holds its SM slot), else 1; values outside 1..8 refused."""
    from oscarkv.kernels.cuda_ops import _merge_slices

    assert _merge_slices(4, 264, 264, False, False) == 4 and _merge_slices(4, 265, 264, False, False) == 1
    assert _merge_slices(4, 8, 264, True, False) == 1 and _merge_slices(4, 8, 264, False, True) == 1
    assert _merge_slices(1, 8, 264, False, False) == 1
    # None: 8 where one merger's 256 threads would load > 12 partials each (128K b1's 33 splits over 2 groups: 17)
    assert _merge_slices(None, 264, 264, False, False, ns=33, threads=256, outputs=512) == 8
    assert _merge_slices(None, 128, 264, False, False, ns=16, threads=256, outputs=512) == 1
    assert _merge_slices(None, 128, 264, False, False, ns=16, threads=128, outputs=1024) == 8  # 16 splits per thread
    assert _merge_slices(None, 265, 264, False, False, ns=33, threads=256, outputs=512) == 1
    for bad in (0, 9, 2.0, True):
        with pytest.raises(ValueError, match="merge_slices"):
            _merge_slices(bad, 8, 264, False, False)


def test_resident_slots_follow_an_mps_thread_limit(monkeypatch):
    """The waiting merges count only the CTA slots an MPS client may hold (else a merger could wait forever for a CTA
    that never gets a slot)."""
    from oscarkv.kernels.cuda_ops import _resident_slots, _merge_slices
    monkeypatch.delenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", raising=False)
    assert _resident_slots(2, 132) == 264
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50")
    assert _resident_slots(2, 132) == 132
    assert _merge_slices(None, 264, _resident_slots(2, 132), False, False, ns=33) == 1
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "junk")
    assert _resident_slots(2, 132) == 264


def test_fill_slots_fills_a_one_wave_grids_empty_slots_only_where_measured_to_pay():
    """_fill_slots (CPU): a one-wave grid with one CTA per SM and long splits takes the split count that fills the
    second slot (batch 1, 8 KV heads, 64K: 2 + 14 -> 2 + 31, 264 CTAs on 132 SMs); short splits, grids already
    filling the slots, fill_tiles=0, fewer slots (an MPS share) and counts that would leave SMs unevenly loaded keep
    the model's count; never more than 33 splits in all."""
    from dataclasses import replace

    from oscarkv.kernels.cuda_ops import _FILL_MAX_SPLITS, CudaDecodeConfig, _fill_slots

    cfg = CudaDecodeConfig(fill_tiles=128)  # the H100's (FILL_TILES); DecodePlan resolves None by the card
    assert _fill_slots(14, 4076, 8, 264, 2, 132, cfg, 2, 200) == 31  # 64K batch 1
    assert _fill_slots(14, 2028, 8, 264, 2, 132, cfg, 2, 200) == 31  # 32K: 145 tiles per CTA
    assert _fill_slots(13, 1004, 8, 264, 2, 132, cfg, 3, 200) == 13  # 16K: 78 tiles per CTA < fill_tiles
    assert _fill_slots(31, 8172, 8, 264, 2, 132, cfg, 2, 200) == 31  # already two CTAs per SM
    assert _fill_slots(14, 4076, 8, 264, 2, 132, replace(cfg, fill_tiles=0), 2, 200) == 14
    assert _fill_slots(14, 4076, 8, 132, 2, 132, cfg, 2, 200) == 14  # half the slots (MPS): no room
    assert _fill_slots(20, 6124, 6, 264, 2, 132, cfg, 2, 200) == 20  # 6 pairs: 33 splits would load SMs unevenly
    assert _fill_slots(0, 0, 8, 264, 2, 132, cfg, 2, 200) == 0
    for bh in (1, 2, 3, 4, 8, 12):
        n = _fill_slots(1, 100000, bh, 1056, 8, 132, cfg, 2, 1000)
        assert n + 2 <= _FILL_MAX_SPLITS and bh * (n + 2) <= 1056


def test_decode_plan_runs_the_filled_split_count_for_each_sequence(monkeypatch):
    """DecodePlan (CPU, the CUDA library and the device's properties faked): on an H100 at the Qwen3-8B shape, batch
    1, the plan's grid and the per-length split tables the kernel reads agree, so a sequence at the plan's length
    runs every split of the grid (fortieth session: a first version filled the grid but its tables still gave each
    sequence the model's 14 INT2 splits, 32K 16.4 us against 14.9); the filled counts where measured to pay
    (36K-80K at head_dim 128, from 32K at 64), the model's elsewhere; a plan with those counts given explicitly runs
    them the same way; on a card the fill has not been measured on (an H200) the model's count unless the config
    names fill_tiles."""
    from types import SimpleNamespace

    from oscarkv.kernels import cuda_ops
    from oscarkv.kernels.cuda_ops import DecodePlan
    from oscarkv.kernels.paged import DecodeMeta

    occupancy = {0: (4, 4), 4: (2, 8), 7: (2, 8), 10: (4, 4), 11: (2, 8)}  # variant: (CTAs per SM, warps) of the .cu
    fake = SimpleNamespace(
        oscar_int2_decode_occupancy=lambda dt, d, v, sf: occupancy.get(v, (0, 0))[0],
        oscar_int2_decode_warps=lambda dt, d, v, sf: occupancy.get(v, (0, -1))[1],
        oscar_int2_decode_cluster=lambda dt, d, v, sf: 0, oscar_int2_decode_max_clusters=lambda dt, d, v, sf: 0)
    monkeypatch.setattr(cuda_ops, "lib", lambda: fake)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda dev: SimpleNamespace(name="NVIDIA H100 80GB HBM3", multi_processor_count=132))

    def plan(L, B=1, head_dim=128, **kw):
        n = 16 * ((L - 320) // 16)  # the benchmarks' page rule: sink 64 + recent 256 in BF16, whole pages INT2
        z = torch.zeros(B, 1, dtype=torch.int32)
        meta = DecodeMeta(z, torch.full((B,), L - n, dtype=torch.int32), z, torch.full((B,), n, dtype=torch.int32),
                          L - n, n)
        p = DecodePlan(B, 32, 8, head_dim, meta, "cpu", **kw)
        e = min(len(p.split_lut) - 1, (n // 16 - 1) // p.lut_tiles)  # the sequence's entry of the tables
        return p.variant, p.n_hp, p.n_int2, p.hp_lut[e], p.split_lut[e], p.merge_slices

    assert plan(16384) == (4, 3, 13, 3, 13, 1)
    # head_dim 128 fills from 160 tiles per CTA (FILL_TILES): 32K (145 at 2 + 14) keeps the model's count, 36K fills
    assert plan(32768)[1:5] == (2, 14, 2, 14)
    for L in (36864, 49152, 65536):
        assert plan(L) == (4, 2, 31, 2, 31, 8), L
    assert plan(32768, head_dim=64)[1:5] == (2, 31, 2, 31)  # head_dim 64 from 128
    assert plan(81920) == (7, 2, 31, 2, 31, 8)
    assert plan(131072) == (7, 2, 31, 2, 31, 8)
    assert plan(65536, n_hp_splits=2, n_int2_splits=31) == plan(65536)
    assert plan(65536, config=cuda_ops.CudaDecodeConfig(fill_tiles=0))[1:3] == (2, 14)
    # a card the fill has not been measured on keeps the split model's count unless the config asks for the fill
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda dev: SimpleNamespace(name="NVIDIA H200", multi_processor_count=132))
    assert plan(65536)[1:3] == (2, 14)
    assert plan(65536, config=cuda_ops.CudaDecodeConfig(fill_tiles=128))[1:3] == (2, 31)
    assert plan(32768, head_dim=64)[1:3] == (2, 14)
