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


def test_log8_scale_tops_calibrated_and_served(tiny, ids, tmp_path):
    """calibrate stores the log8 format's scale_top per layer (K and V: the rotated, clipped sample rows' largest
    scale, rounded up to a power of two, SCALE_TOP_HEADROOM octaves up); a rotation file keeps them; a method with
    scale_dtype="log8" serves with them (QuantConfig.scale_top), OscarCache holds one byte of scale and one of zero
    per row and its logits stay close to the float16 format's; files without tops and per-channel keys are refused."""
    from dataclasses import replace

    from oscarkv.cache import OscarCache
    from oscarkv.calibrate.core import SCALE_TOP_HEADROOM
    from oscarkv.errors import InputError
    from oscarkv.methods import make_method
    from oscarkv.quant import QuantConfig, group_scale_zero

    m = tiny()
    rs = calibrate(m, ids, seq_len=64, batch_size=2, group_size=32, progress=False)
    back = RotationSet.load(rs.save(tmp_path / "rot.safetensors"), m.config)
    assert back.k_scale_top is not None and torch.equal(back.k_scale_top, rs.k_scale_top)
    plan = make_method("oscar", scale_dtype="log8", sink=4, recent=8).layer_plan(0, 32, back)
    assert plan.k_cfg.scale_dtype == "log8" and plan.k_cfg.scale_top == back.scale_top("k", 0)
    # the top sits SCALE_TOP_HEADROOM octaves above the largest scale of the layer's rows
    from oscarkv.rotation import rotate

    x = rotate(rs_rows(m, ids), plan.k_rot)
    raw = group_scale_zero(x, QuantConfig(2, 32, plan.k_cfg.clip_ratio, "float32"))[1].amax()
    assert 2.0 ** (plan.k_cfg.scale_top - SCALE_TOP_HEADROOM - 1) < raw * 4 and raw <= 2.0 ** plan.k_cfg.scale_top
    out = {}
    for sdt in ("float16", "log8"):
        cache = OscarCache(m.config, "oscar", rotations=back, sink=4, recent=8, scale_dtype=sdt, backend="reference")
        out[sdt] = m(ids[None, :48], cache=cache).logits[0, -1]
        if sdt == "log8":
            held = cache.layers[0].hist_k
            assert held.view().scale.dtype == held.view().zero.dtype == torch.uint8
    rel = (out["log8"] - out["float16"]).norm() / out["float16"].norm()
    assert rel < 0.05, rel
    with pytest.raises(InputError, match="log8 scale tops"):
        make_method("oscar", scale_dtype="log8").layer_plan(0, 32, replace(back, k_scale_top=None, v_scale_top=None))
    with pytest.raises(InputError, match="per channel"):
        make_method("kivi", scale_dtype="log8").layer_plan(0, 32, back)


def rs_rows(model, ids):
    """Layer 0's post-RoPE keys of ``ids`` as [1, H, N, d] float32 (a DynamicCache of one forward)."""
    from transformers import DynamicCache

    c = DynamicCache()
    model(ids[None, :64], cache=c)
    return c.layers[0].keys.float()
