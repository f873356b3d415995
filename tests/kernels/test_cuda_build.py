"""CPU (CI): the CUDA source compiles with the shipped flags and its parameter blocks match the ctypes
structs the host code fills (a field added on one side only would shift every later field silently).
Needs nvcc (skipped without it); no GPU: only the host function ``oscar_params_sizes`` is called."""

import ctypes

import pytest

from oscarkv.kernels import cuda_ops
from oscarkv.quant import int2_len


@pytest.mark.skipif(cuda_ops.nvcc_path() is None, reason="needs nvcc")
def test_cuda_library_builds_and_param_structs_match():
    lib = ctypes.CDLL(str(cuda_ops.build()))  # cached by source hash (~80 s on 2 cores the first time)
    sizes = (ctypes.c_int * 2)()
    assert lib.oscar_params_sizes(sizes) == 0
    assert list(sizes) == [ctypes.sizeof(cuda_ops._DecodeParams), ctypes.sizeof(cuda_ops._AppendParams)]
    for name in ("oscar_int2_decode", "oscar_int2_decode_occupancy", "oscar_int2_decode_warps", "oscar_append",
                 "oscar_int2_decode_cluster", "oscar_int2_decode_max_clusters"):
        assert hasattr(lib, name)
    # cluster sizes (host-only constants): variants 8 / 9 merge in clusters of 16 / 8 CTAs, the others do not
    for sf in cuda_ops.SCALE_FORMATS.values():  # every variant is built for every scale format
        assert [lib.oscar_int2_decode_cluster(0, d, v, sf) for d in (64, 128) for v in range(10)] == ([0] * 8 + [16, 8]) * 2
    # warps per CTA (host-only): 4 / 8 / 16 by variant; 12-14 (the 8-warp ring 12 / 10 deep, paired 7) at head_dim
    # 128 only (-1: not built)
    warps = [4, 4, 4, 4, 8, 16, 16, 8, 16, 8, 4, 8, 8, 8, 8]
    for sf in cuda_ops.SCALE_FORMATS.values():
        assert [lib.oscar_int2_decode_warps(dt, 128, v, sf) for dt in (0, 1) for v in range(15)] == warps * 2
        assert [lib.oscar_int2_decode_warps(0, 64, v, sf) for v in range(15)] == warps[:12] + [-1] * 3
    assert lib.oscar_int2_decode_warps(0, 128, 0, len(cuda_ops.SCALE_FORMATS)) == -1  # an unknown format: no kernel


def test_kernel_source_override(monkeypatch, tmp_path):
    """``OSCARKV_KERNEL_SRC`` names another .cu (a candidate kernel: its library gets its own cache folder);
    a missing file is one line naming the variable, before nvcc runs."""
    alt = tmp_path / "alt.cu"
    alt.write_text("// a candidate kernel\n")
    monkeypatch.setenv("OSCARKV_KERNEL_SRC", str(alt))
    assert cuda_ops._default_src() == alt
    shipped = cuda_ops.library_path()
    monkeypatch.setattr(cuda_ops, "_SRC", alt)
    assert cuda_ops.library_path().parent != shipped.parent  # its own cache folder (hash of alt's bytes)
    monkeypatch.setattr(cuda_ops, "_SRC", tmp_path / "missing.cu")
    with pytest.raises(cuda_ops.CudaKernelUnavailable, match="OSCARKV_KERNEL_SRC"):
        cuda_ops.build()
    monkeypatch.delenv("OSCARKV_KERNEL_SRC")
    assert cuda_ops._default_src().name == "int2_paged.cu"


def test_paired_variants_refuse_groups_above_4():
    """Variants 10 / 11 put a second tile's query heads on the MMA columns 4-7: with more than 4 query heads per
    KV head there are none free, refused (one line naming the variant to use) before any CUDA call."""
    import torch

    from helpers import build
    from oscarkv.kernels import CudaDecodeConfig, DecodePlan

    cache, _, ids, _ = build([100], d=128, hkv=2, bs=16, sink=64, recent=256, layout="tile16", blocks=64)
    for v, single in cuda_ops.PAIRED_VARIANTS.items():
        with pytest.raises(ValueError, match=f"variant {v} pairs tiles.*use variant {single}"):
            DecodePlan(1, 16, 2, 128, cache.metadata(ids), "cpu", torch.bfloat16, CudaDecodeConfig(variant=v))


def test_default_variant_rule_per_card():
    """The plan's variant when none is named: the first row of the card's VARIANT_RULES that the (sequence, KV head)
    pairs and the longest sequence's INT2 tiles reach; a paired variant falls back to its single form where the group
    is > 4 or the library lacks it, a row naming another variant the library lacks is skipped; the rows are per card
    and head_dim; unknown cards and head_dims keep the H200 rule."""
    rule = cuda_ops._default_variant
    have_all, have_none = (lambda v: True), (lambda v: False)
    h200, h100, other = "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
    for card in (h200, other):
        assert [rule(p, 4, card, have_all) for p in (1, 63, 64, 255, 256, 4096)] == [4, 4, 11, 11, 10, 10]
        assert [rule(p, 8, card, have_all) for p in (1, 64, 255, 256)] == [4, 4, 4, 0]
        assert [rule(p, 4, card, have_none) for p in (64, 256)] == [4, 0]
        assert rule(8, 4, card, have_all, 10 ** 6) == 4
    # H100, by (sequence, KV head) pairs and INT2 tiles: below 16 pairs 4, 7 from 4608 tiles; 16-31 pairs 4; 32-63
    # pairs 14, 7 from 1536 tiles, 10 from 2304; from 64 pairs 0, 4 from 1536 tiles; from 256 pairs 10, 0 from 3072
    # tiles, 11 from 6144; from 400 pairs 7
    def h100_rule(p, t, group=4, have=have_all, head_dim=128, scale_dtype="float16"):
        return rule(p, group, h100, have, t, head_dim, scale_dtype)

    assert [h100_rule(8, t) for t in (0, 4607, 4608)] == [4, 4, 7]
    assert [h100_rule(p, 10 ** 5) for p in (15, 16, 31)] == [7, 4, 4]
    assert [h100_rule(p, t) for p in (32, 63) for t in (1004, 1535, 1536, 2028, 2303, 2304, 4076)] == [14, 14, 7, 7, 7,
                                                                                                    10, 10] * 2
    assert [h100_rule(32, t, group=8) for t in (1004, 2028, 4076)] == [7, 7, 0]
    assert [h100_rule(64, t) for t in (0, 1535, 1536, 10 ** 5)] == [0, 0, 4, 4]
    assert [h100_rule(255, t) for t in (1535, 1536)] == [0, 4]
    assert [h100_rule(256, t) for t in (0, 3071, 3072, 6143, 6144)] == [10, 10, 0, 0, 11]
    assert [h100_rule(p, t) for p in (399, 400, 4096) for t in (0, 10 ** 5)] == [10, 11, 7, 7, 7, 7]
    assert [h100_rule(256, t, group=8) for t in (0, 6144)] == [0, 4]  # paired rows fall back to their single form
    assert [h100_rule(256, t, have=have_none) for t in (0, 6144)] == [0, 4]
    assert [h100_rule(p, 8192, have=have_none) for p in (8, 400)] == [4, 4]  # 7 only where the library has it
    # H100 at head_dim 64: 11 (4 where the group is > 4), from 256 pairs 10 (0) below 6144 tiles; other head_dims take
    # the default rule
    assert [h100_rule(p, t, head_dim=64) for p in (1, 8, 64, 255) for t in (0, 8192)] == [11] * 8
    assert [h100_rule(p, t, head_dim=64) for p in (256, 4096) for t in (0, 6143, 6144)] == [10, 10, 11] * 2
    assert [h100_rule(p, t, group=8, head_dim=64) for p, t in ((8, 8192), (256, 0), (256, 8192))] == [4, 0, 4]
    assert [h100_rule(p, 8192, head_dim=256) for p in (8, 64, 256)] == [4, 11, 10]
    # H100, log8 records (their own rows): 8 pairs 4, 11 from 2560 tiles, 14 from 5632; 16-31 pairs 4, 11 from 1536,
    # 14 from 3072; 32-63 pairs 10, 11 from 1536, 10 from 5120; 64 pairs 10, 11 from 1536, 4 from 6144; from 256
    # pairs as for fp16; from 400 pairs 11; head_dim 64 keeps the fp16 rows
    def log8(p, t, **kw):
        return h100_rule(p, t, scale_dtype="log8", **kw)

    assert [log8(8, t) for t in (2028, 2560, 4076, 5631, 5632, 8172)] == [4, 11, 11, 11, 14, 14]
    assert [log8(16, t) for t in (1535, 1536, 2028, 3072, 8172)] == [4, 11, 11, 14, 14]
    tiles = (1004, 1535, 1536, 4076, 5119, 5120, 8172)
    assert [log8(p, t) for p in (32, 63) for t in tiles] == [10, 10, 11, 11, 11, 10, 10] * 2
    assert [log8(64, t) for t in (0, 1004, 1536, 6143, 6144)] == [10, 10, 11, 11, 4]
    assert [log8(256, t) for t in (0, 3072, 6144)] == [10, 0, 11]
    assert [log8(p, t) for p in (400, 1024) for t in (0, 2028)] == [11] * 4 and log8(472, 2028, group=8) == 4
    assert [log8(p, 8172, group=8) for p in (8, 16, 32, 64)] == [7, 7, 0, 4]  # paired rows: their single form
    assert log8(64, 1004, group=8) == 0
    assert [log8(8, 8172, head_dim=64), log8(256, 0, head_dim=64)] == [11, 10]
    assert [rule(8, 4, "NVIDIA H200", have_all, 8172, 128, "log8"), rule(256, 4, "NVIDIA H200", have_all, 0, 128,
                                                                          "log8")] == [4, 10]


# The H100's measured winners at the Qwen3-8B shape (8 KV heads, group 4, head_dim 128): (context in K tokens, batch,
# the variants within the rounds' spread of the fastest), from the sweeps of the fiftieth and fifty-first sessions
# (bench/results/2026-12-07_s50*_var_*.log, _s51*_var_*.log; the thirty-seventh session's for fp16 at batch 1, 8, 59,
# 128). INT2 tiles as bench_decode counts them: the window rule with its sink (64), recent window (256) and pages of 16.
_H100_WINNERS = {
    "float16": ((16, 4, {14}), (32, 4, {7}), (40, 4, {10}), (48, 4, {10}), (64, 4, {10}), (128, 4, {0, 10}),
                (96, 1, {7}), (128, 1, {7}), (16, 8, {0}), (32, 59, {7}), (32, 128, {7})),
    "log8": ((32, 1, {4}), (40, 1, {4, 11}), (48, 1, {11}), (56, 1, {11}), (64, 1, {11}), (80, 1, {4, 11}),
             (96, 1, {14}), (112, 1, {14}), (128, 1, {4, 7, 14}), (32, 2, {11}), (64, 2, {14}), (128, 2, {14}),
             (16, 4, {10}), (32, 4, {11}), (40, 4, {10, 11, 14}), (64, 4, {11}), (96, 4, {10}), (128, 4, {10}),
             (16, 8, {10}), (32, 8, {11}), (64, 8, {11}), (128, 8, {4, 14}), (16, 32, {10}), (32, 32, {0, 10}),
             (64, 32, {0}), (128, 32, {11}), (32, 59, {11}), (32, 128, {11})),
}


@pytest.mark.parametrize("scale_dtype", sorted(_H100_WINNERS))
def test_h100_rules_pick_the_measured_winners(scale_dtype):
    """Every measured point's winner is what the H100's VARIANT_RULES pick there, with the tile count computed as the
    benchmark's (a row's boundary typed by hand once missed 64K's 4076 tiles: fiftieth session, 4096)."""
    for ctx, batch, winners in _H100_WINNERS[scale_dtype]:
        tiles = int2_len(ctx * 1024, 64, 256, 16) // 16
        got = cuda_ops._default_variant(8 * batch, 4, "NVIDIA H100 80GB HBM3", lambda v: True, tiles, 128, scale_dtype)
        assert got in winners, (scale_dtype, f"{ctx}K b{batch}", tiles, got, winners)


def test_per_card_tables_by_scale_format():
    """A per-card table (VARIANT_RULES, FILL_TILES) may key an entry by the records' scale format too: that entry wins
    for its format, the format-free entry serves the others, and the default where the card or head_dim has none."""
    table = {("H100", 128): "any", ("H100", 128, "log8"): "log8 row", ("H100", 64, "log8"): "log8 only"}
    h100 = "NVIDIA H100 80GB HBM3"
    assert cuda_ops._per_card(table, h100, 128, "dflt") == "any"
    assert cuda_ops._per_card(table, h100, 128, "dflt", "log8") == "log8 row"
    assert cuda_ops._per_card(table, h100, 64, "dflt") == "dflt"
    assert cuda_ops._per_card(table, h100, 64, "dflt", "log8") == "log8 only"
    assert cuda_ops._per_card(table, "NVIDIA H200", 128, "dflt", "log8") == "dflt"
