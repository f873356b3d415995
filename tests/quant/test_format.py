import pytest
import torch

from oscarkv.quant import (
    QuantConfig,
    dequantize,
    effective_bits_per_element,
    fake_quantize,
    kv_cache_bytes,
    pack_codes,
    quantize,
    unpack_codes,
)


@pytest.mark.parametrize("bits", [2, 4])
@pytest.mark.parametrize("d", [64, 128])
def test_pack_unpack_roundtrip(bits, d):
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 2**bits, (5, 3, d), generator=g, dtype=torch.uint8)
    packed = pack_codes(codes, bits)
    assert packed.dtype == torch.uint8 and packed.shape == (5, 3, d * bits // 8)
    assert torch.equal(unpack_codes(packed, bits), codes)


def test_int2_bit_order_is_quartered():
    d = 128
    codes = torch.zeros(d, dtype=torch.uint8)
    codes[5], codes[5 + 32], codes[5 + 64], codes[5 + 96] = 1, 2, 3, 1
    packed = pack_codes(codes, 2)
    assert packed[5].item() == 1 | 2 << 2 | 3 << 4 | 1 << 6
    assert int(packed.sum() - packed[5]) == 0


@pytest.mark.parametrize("bits", [2, 4])
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("sdt", ["float16", "float32"])
def test_roundtrip_error_within_half_step(bits, group, sdt):
    torch.manual_seed(1)
    x = torch.randn(4, 7, 128) * 3 + 0.5
    cfg = QuantConfig(bits=bits, group_size=group, scale_dtype=sdt)
    q = quantize(x, cfg)
    xh = dequantize(q, cfg)
    step = q.scale.float().repeat_interleave(group, -1)
    err = (x - xh).abs()
    # uniform rounding: error <= step/2 (+ fp16 rounding slack of the stored scale/zero)
    slack = 1e-5 if sdt == "float32" else 4e-3 * x.abs().max()
    assert (err <= step / 2 + slack).all()
    assert q.codes.shape == (4, 7, 128 * bits // 8)
    assert q.scale.shape == (4, 7, 128 // group)


def test_constant_row_is_exact():
    x = torch.full((2, 64), 3.25)
    q = quantize(x, QuantConfig(group_size=64, scale_dtype="float32"))
    assert torch.allclose(dequantize(q), x)


def test_extremes_are_reconstructed_uniform():
    torch.manual_seed(2)
    x = torch.randn(10, 128)
    cfg = QuantConfig(scale_dtype="float32")
    xh = dequantize(quantize(x, cfg))
    assert torch.allclose(xh.amax(-1), x.amax(-1), atol=1e-5)
    assert torch.allclose(xh.amin(-1), x.amin(-1), atol=1e-5)


def test_clipping_follows_rank_rule():
    x = torch.arange(1, 129, dtype=torch.float32)[None]  # |x| sorted = 1..128
    cfg = QuantConfig(clip_ratio=0.96, scale_dtype="float32")
    q = quantize(x, cfg)
    # index floor(0.96*128) = 122 -> tau = 123; the 5 largest are clipped
    assert dequantize(q).max().item() == pytest.approx(123.0, abs=1e-4)


def test_clipping_helps_outlier_rows():
    torch.manual_seed(3)
    x = torch.randn(256, 128)
    x[:, 7] *= 30
    plain = dequantize(quantize(x, QuantConfig()))
    clipped = dequantize(quantize(x, QuantConfig(clip_ratio=0.96)))
    # clipping trades the outlier column for the other 127 coordinates
    mask = torch.ones(128, dtype=torch.bool)
    mask[7] = False
    assert (clipped - x)[:, mask].pow(2).mean() < (plain - x)[:, mask].pow(2).mean()


def test_nonuniform_levels_pick_nearest_and_are_exact():
    lv = (0.0, 0.8, 2.2, 3.0)
    cfg = QuantConfig(levels=lv, scale_dtype="float32", group_size=4)
    x = torch.tensor([[0.0, 1.0, 2.0, 3.0]])  # scale 1, zero 0 -> positions in code units == x
    xh = dequantize(quantize(x, cfg), cfg)
    assert torch.allclose(xh, torch.tensor([[0.0, 0.8, 2.2, 3.0]]))


def test_bad_config_messages():
    with pytest.raises(ValueError, match="bits=3"):
        QuantConfig(bits=3)
    with pytest.raises(ValueError, match="multiple of group_size"):
        quantize(torch.randn(2, 96), QuantConfig(group_size=64))
    with pytest.raises(ValueError, match="scale_dtype"):
        QuantConfig(scale_dtype="int8")
    with pytest.raises(ValueError, match="sorted"):
        QuantConfig(levels=(0, 2, 1, 3))
    with pytest.raises(ValueError, match="NaN or inf"):
        quantize(torch.tensor([[1.0, float("nan"), 0.0, 2.0]]), QuantConfig(group_size=4))


def test_effective_bits_matches_paper():
    assert effective_bits_per_element(131072) == pytest.approx(2.2836, abs=1e-4)
    assert effective_bits_per_element(32768) == pytest.approx(2.384, abs=1e-3)
    assert effective_bits_per_element(131072, sink=0, recent=0) == pytest.approx(2.25)
    assert effective_bits_per_element(131072, sink=0, recent=0, bits=4) == pytest.approx(4.25)
    assert effective_bits_per_element(100, sink=64, recent=256) == 16.0
    assert kv_cache_bytes(1000, 2, 3, 64, 16.0) == 2 * 1000 * 2 * 3 * 64 * 2


@pytest.mark.parametrize("levels", [None, (0.0, 0.8, 2.2, 3.0)])
@pytest.mark.parametrize("clip", [None, 0.9])
def test_fake_quantize_is_quantize_then_dequantize(levels, clip):
    """The unpacked fast path (evaluation, clip search) gives exactly the serving path's values."""
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(4)) * 3 + 1
    cfg = QuantConfig(2, 32, clip, "float16", levels)
    assert torch.equal(fake_quantize(x, cfg), dequantize(quantize(x, cfg), cfg))


def test_window_rule_int_and_tensor_agree():
    """quant.int2_len, the one window rule: whole pages leave the recent window; ints and tensors agree."""
    import torch

    from oscarkv.quant import int2_len

    t = torch.arange(0, 400)
    for sink, recent, page in ((0, 0, 1), (64, 256, 16), (4, 59, 1), (16, 32, 16)):
        got = int2_len(t, sink, recent, page)
        want = [page * (max(0, n - sink - recent) // page) for n in range(400)]
        assert got.tolist() == want == [int2_len(n, sink, recent, page) for n in range(400)]
        assert all(x % page == 0 for x in want)


def test_log8_scale_and_zero_in_one_byte_each():
    """scale_dtype="log8": scale 2**(T - e/32) with e the nearest step in log2 (float32 midpoints), zero the group
    minimum rounded to a quarter of that step; codes chosen against those values, so the round-trip error is at
    most half a step plus the zero's rounding (an eighth of a step) and the scale's (1.1% of the range)."""
    from oscarkv.quant import log8_top, scale_zero_values
    from oscarkv.quant.format import LOG8_MIDS, LOG8_SCALES

    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 9, 128, generator=g) * torch.rand(6, 9, 1, generator=g) * 4 + 0.3
    base = QuantConfig(clip_ratio=0.95)
    t = log8_top(x, base)
    cfg = QuantConfig(clip_ratio=0.95, scale_dtype="log8", scale_top=t)
    q = quantize(x, cfg)
    assert q.scale.dtype == q.zero.dtype == torch.uint8 and q.nbytes() == x.numel() // 4 + 2 * 6 * 9
    s, z = scale_zero_values(q.scale, q.zero, cfg)
    raw = quantize(x, QuantConfig(clip_ratio=0.95, scale_dtype="float32")).scale
    assert (raw <= 2.0**t).all() and raw.max() > 2.0 ** (t - 2)  # log8_top: one octave of headroom
    inside = raw >= 2.0 ** (t - 254 / 32)  # smaller scales take the smallest step (e = 254): ~8 octaves below 2^T
    assert ((s.log2() - raw.log2()).abs() <= 0.5 / 32 + 1e-6)[inside].all()  # the nearest 2^(1/32) step
    assert (q.scale[~inside] == 254).all() and (~inside).any()
    zq = q.zero.float() - 128  # the stored byte is zq + 128
    assert torch.equal(z, s * zq / 4) and zq.abs().max() < 128 and zq.min() < 0
    xc = x.clamp(-(x.abs().sort(-1).values[..., 121:122]), x.abs().sort(-1).values[..., 121:122])  # rho 0.95: k 121
    err = (dequantize(q, cfg) - xc).abs()
    assert (err <= s * (0.5 + 0.125) + 3 * 0.011 * raw + 1e-6).all()  # (a larger step where clamped)
    assert torch.equal(fake_quantize(x, cfg), dequantize(q, cfg))
    # the table: e = 0 .. 254 exact powers 2^(-e/32), midpoints between neighbours, 255 the NaN marker
    assert torch.isnan(LOG8_SCALES[255]) and (LOG8_SCALES[1:255] < LOG8_SCALES[:254]).all()
    assert ((LOG8_MIDS < LOG8_SCALES[:255]) & (LOG8_MIDS > LOG8_SCALES[1:256].nan_to_num(0))).all()
    nan_rows = quantize.__globals__["QuantizedRows"](q.codes[:1, :1], torch.full((1, 1, 1), 255, dtype=torch.uint8),
                                                     q.zero[:1, :1], 128, 2)
    assert dequantize(nan_rows, cfg).isnan().all()  # a non-finite row's marker (the CUDA append writes it)


def test_log8_config_errors_name_the_fix():
    with pytest.raises(ValueError, match="scale_top"):
        QuantConfig(scale_dtype="log8")
    with pytest.raises(ValueError, match=r"scale_top, an integer in \[-100, 100\]"):
        QuantConfig(scale_dtype="log8", scale_top=1.5)
    with pytest.raises(ValueError, match="log8' only"):
        QuantConfig(scale_top=3)
    q = quantize(torch.randn(2, 64), QuantConfig(group_size=64, scale_dtype="log8", scale_top=2))
    with pytest.raises(ValueError, match="need their QuantConfig"):
        dequantize(q)
