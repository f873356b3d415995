import pytest
import torch

from oscarkv.calibrate import calibrate, make_batches
from oscarkv.rotation import COMPOSITIONS, RotationSet, hadamard, orthogonality_error


def test_make_batches():
    b = make_batches(torch.arange(10), 4, 2)
    assert [tuple(x.shape) for x in b] == [(2, 4), (1, 2)]
    b = make_batches([torch.arange(5), list(range(3))], 4, 3)
    assert sorted(tuple(x.shape) for x in b) == [(1, 1), (1, 3), (1, 4)]


def test_end_to_end_save_load(tiny, ids, tmp_path):
    m = tiny()
    rs = calibrate(m, ids, seq_len=64, batch_size=2, group_size=16, progress=False, model_id="tiny-llama")
    p = rs.save(tmp_path / "rot.safetensors")
    back = RotationSet.load(p, m.config)
    assert back.k_rotation.shape == (2, 1, 32, 32)
    torch.testing.assert_close(back.v_rotation, rs.v_rotation)
    torch.testing.assert_close(back.k_clip, rs.k_clip)
    for key in ("model_id", "config_hash", "num_layers", "num_kv_heads", "head_dim", "group_size", "bits",
                "calib_tokens", "composition", "objective", "clip_candidates"):
        assert back.meta[key] == rs.meta[key], key
    assert back.meta["model_id"] == "tiny-llama" and back.meta["group_size"] == 16
    for r in back.k_rotation.reshape(-1, 32, 32).tolist() + back.v_rotation.reshape(-1, 32, 32).tolist():
        assert orthogonality_error(torch.tensor(r)) < 1e-5


@pytest.mark.parametrize("kind", ["qwen2", "qwen3"])
def test_qwen_families(tiny, ids, kind):
    rs = calibrate(tiny(kind), ids, seq_len=64, group_size=32, progress=False)
    assert rs.num_layers == 2 and rs.head_dim == 32
    assert torch.isfinite(rs.k_rotation).all() and torch.isfinite(rs.v_eigenvalues).all()


def test_per_head_and_compositions(tiny, ids):
    m = tiny()
    rs = calibrate(m, ids, seq_len=64, group_size=32, per_head=True, fit_clip=False, progress=False)
    assert rs.k_rotation.shape == (2, 2, 32, 32) and rs.k_eigenvalues.shape == (2, 2, 32)
    rs.check_model(m.config)
    rh = calibrate(m, ids, seq_len=64, group_size=32, composition="h", fit_clip=False, progress=False)
    torch.testing.assert_close(rh.k_rotation[0, 0], hadamard(32, torch.float32))
    assert set(COMPOSITIONS) >= {"u_h_pbr", "u_h", "u"}
    ru = calibrate(m, ids, seq_len=64, group_size=32, composition="u", fit_clip=False, progress=False)
    # u and u_h_pbr start from the same eigenbasis: R_uhp = U H P
    r = ru.k_rotation[0, 0].double()
    rd = calibrate(m, ids, seq_len=64, group_size=32, fit_clip=False, progress=False)
    assert rd.meta["composition"] == "u_h_pbr"
    uh = r @ hadamard(32)
    cols = rd.k_rotation[0, 0].double()
    # every column of U.H.P is a column of U.H (up to the sign ambiguity of eigenvectors)
    match = (cols.T @ uh).abs().max(1).values
    assert torch.allclose(match, torch.ones(32, dtype=torch.float64), atol=1e-4)
