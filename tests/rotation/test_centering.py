"""Exact centering (rotation/centering.py): softmax attention is unchanged when every key is shifted by
one vector per head and values are stored minus their mean with the mean added to the output."""

import pytest
import torch
import torch.nn.functional as F

from oscarkv.methods import fake_quant_rows, make_method
from oscarkv.quant import QuantConfig
from oscarkv.rotation import RotationSet, add_value_mean, center, hadamard, rotated_mean, uncenter, value_output_mean


def _attn(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])


def test_centering_is_exact_for_attention():
    g = torch.Generator().manual_seed(0)
    b, hq, hkv, t, d = 2, 4, 2, 16, 32
    q = torch.randn(b, hq, t, d, generator=g, dtype=torch.float64)
    k = torch.randn(b, hkv, t, d, generator=g, dtype=torch.float64) + 50 * torch.randn(hkv, 1, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, hkv, t, d, generator=g, dtype=torch.float64) + 3
    mk, mv = k.mean(dim=(0, 2)), v.mean(dim=(0, 2))
    want = _attn(q, k, v)
    got = add_value_mean(_attn(q, center(k, mk), center(v, mv)), mv)
    assert torch.allclose(got, want, atol=1e-9)
    # rotated basis: stored (x - m) R, output + m R, then rotated back
    r = torch.linalg.qr(torch.randn(hkv, d, d, generator=g, dtype=torch.float64))[0]
    from oscarkv.rotation import rotate, unrotate

    out = _attn(rotate(q, r), center(k, mk) @ r, center(v, mv) @ r)  # query head h: its KV head's R
    out = unrotate(add_value_mean(out, rotated_mean(mv, r)), r)
    assert torch.allclose(out, want, atol=1e-9)
    # [B, T, H, d] layout
    o2 = add_value_mean(_attn(q, center(k, mk), center(v, mv)).transpose(1, 2), mv, heads_dim=2)
    assert torch.allclose(o2.transpose(1, 2), want, atol=1e-9)


def test_center_uncenter_roundtrip_and_shapes():
    x = torch.randn(1, 3, 5, 8)
    m = torch.randn(3, 8)
    assert torch.equal(center(x, None), x)
    assert torch.allclose(uncenter(center(x, m), m), x, atol=1e-6)
    assert torch.allclose(center(x, m[:1]), x - m[0], atol=0)
    with pytest.raises(ValueError):
        center(x, torch.randn(2, 8))
    assert value_output_mean(torch.arange(6.0).reshape(2, 3), 4)[:, 0].tolist() == [0, 0, 3, 3]


def test_centering_removes_an_offset_before_int2():
    """A large per-channel offset ruins token-wise INT2; centering on the true mean removes it."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 2, 256, 64, generator=g) + 100 * torch.randn(2, 1, 64, generator=g)
    m = x.mean(dim=(0, 2))
    cfg = QuantConfig(2, 64)
    h = hadamard(64, torch.float32)[None]
    plain = (fake_quant_rows(x, cfg, h) - x).pow(2).mean()
    centered = (fake_quant_rows(x, cfg, h, mean=m) - x).pow(2).mean()
    assert centered < plain / 100


def _rot_file(means: bool, n=2, d=32, h=2):
    r = torch.eye(d).expand(n, 1, d, d).clone()
    kw = dict(k_mean=torch.randn(n, h, d), v_mean=torch.randn(n, h, d)) if means else {}
    return RotationSet(k_rotation=r, v_rotation=r, meta={"model_id": "t"}, **kw)


def test_which_methods_center():
    rs = _rot_file(True)
    assert make_method("hadamard").layer_plan(0, 32, rs).centered  # auto, file has means
    assert make_method("int4").layer_plan(0, 32, rs).centered
    assert not make_method("hadamard").layer_plan(0, 32, _rot_file(False)).centered
    assert not make_method("hadamard").layer_plan(0, 32, None).centered
    assert not make_method("oscar").layer_plan(0, 32, rs).centered  # the paper's recipe
    assert make_method("oscar+center").layer_plan(0, 32, rs).centered
    assert not make_method("hadamard+nocenter").layer_plan(0, 32, rs).centered
    assert make_method("oscar+center").name == "oscar+center"
    assert not make_method("naive").layer_plan(0, 32, rs).centered
    with pytest.raises(ValueError, match="calibrated means"):
        make_method("oscar+center").layer_plan(0, 32, _rot_file(False))
    with pytest.raises(ValueError):
        make_method("kivi+center")


def test_rotation_file_v2_roundtrip_and_v1_still_loads(tmp_path):
    from safetensors.torch import save_file

    rs = _rot_file(True)
    rs.meta["centered"] = True
    p = rs.save(tmp_path / "r.safetensors")
    back = RotationSet.load(p)
    assert back.centered and torch.equal(back.mean("k", 1), rs.k_mean[1])
    # a version-1 file (no means) written as the old code did
    r = torch.eye(32)[None, None].expand(2, 1, 32, 32).contiguous()
    save_file({"k_rotation": r, "v_rotation": r.clone()}, str(tmp_path / "old.safetensors"),
              metadata={"format": '"oscar-kv-rotations/1"', "model_id": '"t"'})
    old = RotationSet.load(tmp_path / "old.safetensors")
    assert old.k_mean is None and old.mean("v", 0) is None and not old.centered


def test_key_rescale_is_exact_and_favours_query_directions():
    from oscarkv.rotation import key_rescale

    g = torch.Generator().manual_seed(3)
    d = 16
    a = torch.randn(d, d, generator=g, dtype=torch.float64)
    cq = a @ a.T + torch.diag(torch.logspace(0, 4, d, dtype=torch.float64))
    k2 = torch.eye(d, dtype=torch.float64)
    s, si = key_rescale(cq, k2)
    assert torch.allclose(s @ si, torch.eye(d, dtype=torch.float64), atol=1e-9)
    q, k = torch.randn(5, d, generator=g, dtype=torch.float64), torch.randn(7, d, generator=g, dtype=torch.float64)
    assert torch.allclose((q @ si) @ (k @ s).T, q @ k.T, atol=1e-9)
    lam, u = torch.linalg.eigh(cq)
    gains = torch.einsum("di,de,ei->i", u, s, u)  # s_i along the query eigenvectors
    assert gains[-1] > gains[0]  # more key range where queries look


@pytest.mark.parametrize("hkv", [1, 2])
def test_value_mean_bias_equals_adding_the_mean_before_o_proj(hkv):
    """o_proj(o + mu_V per query head) == o_proj(o) + value_mean_bias(W_o, mu_V) (GQA-expanded heads)."""
    from oscarkv.errors import InputError
    from oscarkv.rotation import value_mean_bias

    g = torch.Generator().manual_seed(4)
    b, t, hq, d, hidden = 2, 3, 4, 8, 24
    w = torch.randn(hidden, hq * d, generator=g, dtype=torch.float64)
    o = torch.randn(b, t, hq, d, generator=g, dtype=torch.float64)
    mv = torch.randn(hkv, d, generator=g, dtype=torch.float64)
    want = add_value_mean(o, mv, heads_dim=2).reshape(b, t, -1) @ w.T
    got = o.reshape(b, t, -1) @ w.T + value_mean_bias(w, mv).double()
    assert torch.allclose(got, want, atol=1e-5)
    assert value_mean_bias(w, None) is None
    with pytest.raises(InputError, match="o_proj weight"):
        value_mean_bias(w[:, :-1], mv)
