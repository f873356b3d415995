import json

import pytest
import torch

from oscarkv.calibrate import calibrate
from oscarkv.calibrate.inspect import inspect_rotations
from oscarkv.eval.report import plot_spectra
from oscarkv.rotation import RotationSet, hadamard, oscar_rotation


def _set(composition, d=32):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(d, d, generator=g, dtype=torch.float64) * torch.logspace(0, -2, d, dtype=torch.float64)
    cov = a @ a.T
    r, lam = oscar_rotation(cov, composition)
    rs = RotationSet(k_rotation=r.float()[None, None], v_rotation=r.float()[None, None],
                     k_eigenvalues=lam.float()[None, None], v_eigenvalues=lam.float()[None, None],
                     k_clip=torch.tensor([0.9]), v_clip=torch.tensor([1.0]), meta={"composition": composition})
    return rs, cov


@pytest.mark.parametrize("composition", ["u", "u_h", "u_h_pbr"])
def test_rotated_group_shares_match_covariance(composition):
    rs, cov = _set(composition)
    info = inspect_rotations(rs, group_sizes=(8, 16))
    r = rs.k_rotation[0, 0].double()
    diag = torch.diagonal(r.T @ cov @ r)
    want = (diag.reshape(-1, 8).sum(-1) / diag.sum()).tolist()
    got = info["layers"][0]["k"]["rotations"][0]["group_share"]["8"]["rotated"]
    assert got == pytest.approx(want, abs=1e-4)
    if composition != "u":  # full Hadamard after U: every coordinate carries tr/d
        assert info["layers"][0]["k"]["rotations"][0]["imbalance"]["8"]["rotated"] == pytest.approx(1.0, abs=1e-4)


def test_summary_fields():
    rs, cov = _set("u_h_pbr")
    info = inspect_rotations(rs)
    json.dumps(info)  # plain data
    k = info["layers"][0]["k"]
    r0 = k["rotations"][0]
    lam = torch.linalg.eigvalsh(cov).flip(0)
    assert r0["top_fraction"]["1"] == pytest.approx((lam[0] / lam.sum()).item(), rel=1e-4)
    assert r0["top_fraction"]["1"] <= r0["top_fraction"]["4"] <= r0["top_fraction"]["16"] <= 1
    assert k["clip"] == pytest.approx(0.9) and info["layers"][0]["v"]["clip"] is None
    assert info["group_sizes"] == [16, 32]
    imb = r0["imbalance"]["16"]
    assert imb["bit_reversed"] <= imb["eigenbasis"]  # P_br spreads the top directions over groups


def test_unknown_basis_and_plot(tiny, ids, tmp_path):
    h = hadamard(32, torch.float32)[None, None]
    info = inspect_rotations(RotationSet(k_rotation=h, v_rotation=h, meta={"composition": "h"}))
    assert info["layers"][0]["k"]["rotations"][0]["eigenvalues"] is None
    plot_spectra(info, tmp_path / "empty.png")  # no eigenvalues: still draws
    rs = calibrate(tiny(), ids, seq_len=64, group_size=16, per_head=True, progress=False)
    info = inspect_rotations(rs)
    assert len(info["layers"][1]["v"]["rotations"]) == 2
    out = plot_spectra(info, tmp_path / "spectra.png")
    assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
