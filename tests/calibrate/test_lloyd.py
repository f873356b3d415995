import pytest
import torch

from oscarkv.calibrate import calibrate, fit_layer_levels, fit_levels
from oscarkv.calibrate.lloyd import code_positions, weighted_mse
from oscarkv.methods import make_method
from oscarkv.quant import QuantConfig, clip_rows, dequantize, quantize, unpack_codes

CFG = QuantConfig(bits=2, group_size=16, clip_ratio=0.9, scale_dtype="float16")


def _rows(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(200, 32, generator=g) * torch.linspace(0.5, 2, 32) + 3.0  # offset: tests the zero point


def test_code_positions_match_quantize():
    x = _rows()
    u, scale = code_positions(x, CFG)
    uc, _ = code_positions(clip_rows(x, 0.9), CFG)  # clipped values: positions of the clipped row
    assert uc.min() >= -0.01 and uc.max() <= 3.01  # only fp16 rounding of scale/zero moves u out of [0, 3]
    assert u.max() > 3.1  # unclipped targets lie beyond the end level
    q = quantize(x, CFG)
    codes = unpack_codes(q.codes, 2).long()
    assert torch.equal(codes, torch.floor(u + 0.5).clamp(0, 3).long())
    torch.testing.assert_close(scale[:, ::16], q.scale.float())


def test_fitted_levels_sorted_in_range_and_lower_mse():
    x = _rows()
    lv = fit_layer_levels(x, CFG)
    assert lv.shape == (4,) and torch.all(lv[1:] > lv[:-1]) and lv.min() >= 0 and lv.max() <= 3
    u, scale = code_positions(x, CFG)
    w = scale.double() ** 2
    uniform = torch.arange(4.0, dtype=torch.float64)
    assert weighted_mse(u, w, lv) < weighted_mse(u, w, uniform)
    # the same holds for the real quantize -> dequantize round trip, in the value domain
    lm = QuantConfig(2, 16, 0.9, "float16", tuple(lv.tolist()))
    err_lm = (dequantize(quantize(x, lm), lm) - x).pow(2).sum()
    err_un = (dequantize(quantize(x, CFG), CFG) - x).pow(2).sum()
    assert err_lm < err_un


def test_quantize_picks_nearest_level_and_dequantize_is_exact_on_levels():
    lv = (0.0, 0.7, 2.1, 3.0)
    cfg = QuantConfig(2, 16, None, "float32", lv)
    x = _rows()
    q = quantize(x, cfg)
    u, _ = code_positions(x, cfg)
    codes = unpack_codes(q.codes, 2).long()
    levels = torch.tensor(lv)
    nearest = (u[..., None] - levels).abs().argmin(-1)
    assert torch.equal(codes, nearest)
    xh = dequantize(q, cfg)
    zero = q.zero.float().repeat_interleave(16, -1)
    sc = q.scale.float().repeat_interleave(16, -1)
    torch.testing.assert_close(xh, zero + sc * levels[codes], rtol=0, atol=0)
    # a row that lies exactly on the levels survives the round trip
    row = torch.tensor([0.0, 0.7, 2.1, 3.0] * 4)
    torch.testing.assert_close(dequantize(quantize(row, cfg), cfg), row)


def test_fit_levels_recovers_clusters():
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([0.2, 1.2, 1.9, 2.8])
    u = centres[torch.randint(0, 4, (4000,), generator=g)] + 0.02 * torch.randn(4000, generator=g)
    torch.testing.assert_close(fit_levels(u).float(), centres, atol=0.01, rtol=0)


def test_calibrate_lloyd_max_end_to_end(tiny, ids, tmp_path):
    from oscarkv.rotation import RotationSet

    m = tiny()
    rs = calibrate(m, ids, seq_len=64, group_size=16, levels="lloyd-max", progress=False)
    back = RotationSet.load(rs.save(tmp_path / "r.safetensors"), m.config)
    assert back.k_levels.shape == back.v_levels.shape == (2, 4)
    for t in (back.k_levels, back.v_levels):
        assert torch.all(t[:, 1:] > t[:, :-1]) and t.min() >= 0 and t.max() <= 3
    plan = make_method("oscar", group_size=16, levels="lloyd-max").layer_plan(1, 32, back)
    assert plan.k_cfg.levels == back.levels("k", 1) and plan.v_cfg.clip_ratio == back.clip("v", 1)
    with pytest.raises(ValueError, match="levels"):
        calibrate(m, ids, levels="nope", progress=False)


def test_fit_levels_equals_plain_lloyd():
    g = torch.Generator().manual_seed(3)
    u = (torch.randn(3000, generator=g, dtype=torch.float64) * 0.8 + 1.5).clamp(-0.2, 3.2)
    w = torch.rand(3000, generator=g, dtype=torch.float64)
    lv = torch.arange(4, dtype=torch.float64)
    for _ in range(30):  # textbook Lloyd: nearest level (quantize's tie rule), weighted centroids
        idx = torch.bucketize(u, (lv[1:] + lv[:-1]) / 2, right=True)
        lv = torch.stack([(w[idx == j] * u[idx == j]).sum() / w[idx == j].sum() for j in range(4)]).clamp(0, 3)
    torch.testing.assert_close(fit_levels(u, w, iters=30, tol=0), lv)
