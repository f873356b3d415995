import torch

from oscarkv.calibrate import DEFAULT_CLIP_GRID, calibrate
from oscarkv.calibrate.clip import KeyClipSearch, check_grid, clip_config, pick, value_clip_errors
from oscarkv.quant import QuantConfig, fake_quantize
from oscarkv.rotation import hadamard

BASE = QuantConfig(bits=2, group_size=16, scale_dtype="float16")


def test_key_error_is_logit_error():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 30, 32, generator=g)  # 4 query heads, 2 KV heads
    k = torch.randn(1, 2, 20, 32, generator=g) * torch.linspace(0.1, 3, 32)
    cq = torch.stack([q[0, 2 * h:2 * h + 2].reshape(-1, 32).double().T @ q[0, 2 * h:2 * h + 2].reshape(-1, 32).double() / 60
                      for h in range(2)])
    r = hadamard(32, torch.float32)[None]
    s = KeyClipSearch(r, cq, BASE, (0.9, 1.0))
    s.update(k)
    for i, rho in enumerate((0.9, 1.0)):
        xr = k @ r[0]
        e = fake_quantize(xr, clip_config(BASE, rho)) @ r[0].T - k  # error in the original basis
        ref = sum(((q[0, 2 * h:2 * h + 2] @ e[0, h].T) ** 2).mean() for h in range(2)) / 2  # mean over q, t, h
        assert torch.isclose(s.errors()[i], ref.double(), rtol=1e-3)


def test_value_error_weighted():
    g = torch.Generator().manual_seed(0)
    v = torch.randn(50, 2, 32, generator=g)
    w = torch.rand(50, 2, generator=g, dtype=torch.float64)
    r = hadamard(32, torch.float32)[None]
    errs = value_clip_errors(v, w, r, BASE, (0.9, 1.0))
    for i, rho in enumerate((0.9, 1.0)):
        xr = v @ r[0]
        e = (fake_quantize(xr, clip_config(BASE, rho)) - xr).double()
        assert torch.isclose(errs[i], (w * e.pow(2).sum(-1)).mean(), rtol=1e-6)


def test_grid_and_pick():
    assert check_grid((0.9, 0.8)) == (0.8, 0.9, 1.0)
    assert pick((0.9, 0.96, 1.0), torch.tensor([2.0, 1.0, 1.0], dtype=torch.float64)) == 1.0  # tie -> less clipping
    assert pick((0.9, 0.96, 1.0), torch.tensor([0.5, 1.0, 1.0], dtype=torch.float64)) == 0.9


def test_fitted_clip_in_grid_and_not_worse_than_off(tiny, ids):
    rs = calibrate(tiny(), ids, seq_len=64, group_size=16, progress=False)
    grid = rs.meta["clip_candidates"]
    assert tuple(grid) == DEFAULT_CLIP_GRID
    for kind in ("k", "v"):
        clips = getattr(rs, f"{kind}_clip").tolist()
        for layer, rho in enumerate(clips):
            assert min(abs(rho - c) for c in grid) < 1e-6
            errs = rs.meta["clip_errors"][kind][layer]
            assert errs[grid.index(min(grid, key=lambda c: abs(c - rho)))] <= errs[grid.index(1.0)]


def test_clip_off_uses_paper_defaults(tiny, ids):
    rs = calibrate(tiny(), ids, seq_len=64, group_size=16, fit_clip=False, progress=False)
    assert rs.clip("k", 0) == torch.tensor(0.96).item() and rs.clip("v", 1) == torch.tensor(0.92).item()


def test_grid_errors_equal_serving_path():
    from oscarkv.calibrate.clip import grid_errors

    x = torch.randn(3, 40, 32, generator=torch.Generator().manual_seed(2)) * torch.linspace(0.2, 4, 32)
    grid = (0.8, 0.86, 0.9, 0.96, 1.0)
    got = grid_errors(x, grid, BASE, lambda e: e.pow(2).sum())
    want = [(fake_quantize(x, clip_config(BASE, r)) - x).double().pow(2).sum().item() for r in grid]
    assert got.tolist() == want
