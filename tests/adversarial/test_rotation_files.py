"""Issue 11 item 1: a well-formed but wrong rotation file must be refused at load, with one line."""

import pytest
import torch

from oscarkv.errors import InputError, OscarKVError
from oscarkv.rotation import RotationSet, import_rotationzoo
from oscarkv.rotation.checks import RULES, RotationFileError

from adv_helpers import cfg, good_rotations, tiny_config


def _save_and_load(rs, tmp_path, config=None):
    # save without validation (a corrupt file as another tool would write it), then load
    p = tmp_path / "rot.safetensors"
    rs.save(p)
    return RotationSet.load(p, config)


def _one_line(e):
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert isinstance(e.value, OscarKVError) and isinstance(e.value, ValueError)
    return msg


def test_good_file_roundtrips(tmp_path, cfg):
    rs = _save_and_load(good_rotations(levels=True), tmp_path, cfg)
    assert rs.levels("k", 1) == pytest.approx((0.0, 0.9, 2.1, 3.0))


@pytest.mark.parametrize("case, match", [
    ("random_k", "k_rotation (layer 0, rotation 0) is not orthogonal"),
    ("zero_v", "v_rotation (layer 0, rotation 0) is not orthogonal"),
    ("nan_k", "k_rotation (layer 1, rotation 0) contains NaN"),
    ("inf_v", "v_rotation (layer 0, rotation 0) contains NaN or inf"),
    ("scaled_k", "not orthogonal"),
    ("clip_above_one", r"k_clip \(layer 1\) is 1.5; clip ratios must be in \(0, 1\]"),
    ("clip_negative", r"v_clip \(layer 0\) is -0.2"),
    ("clip_nan", "k_clip (layer 0) contains NaN"),
    ("levels_unsorted", r"k_levels \(layer 0\) are not sorted"),
    ("levels_nan", "v_levels (layer 1) contains NaN"),
    ("levels_out_of_range", r"leave the code range \[0, 3\]"),
    ("levels_wrong_count", r"k_levels has shape \(2, 3\), expected \(2, 4\)"),
    ("eig_wrong_layers", r"k_eigenvalues has shape \(1, 1, 32\), expected \(2, 1, 32\)"),
    ("eig_nan", "v_eigenvalues (layer 0) contains NaN"),
    ("clip_wrong_layers", r"v_clip has shape \(3,\), expected \(2,\)"),
    ("meta_layers", "metadata num_layers=5 but the rotations have 2"),
])
def test_corrupt_file_refused_at_load(tmp_path, case, match):
    rs = good_rotations(levels=True)
    if case == "random_k":
        rs.k_rotation = torch.randn_like(rs.k_rotation)
    elif case == "zero_v":
        rs.v_rotation = torch.zeros_like(rs.v_rotation)
    elif case == "nan_k":
        rs.k_rotation[1, 0, 3, 4] = float("nan")
    elif case == "inf_v":
        rs.v_rotation[0, 0, 0, 0] = float("inf")
    elif case == "scaled_k":
        rs.k_rotation = rs.k_rotation * 1.01
    elif case == "clip_above_one":
        rs.k_clip[1] = 1.5
    elif case == "clip_negative":
        rs.v_clip[0] = -0.2
    elif case == "clip_nan":
        rs.k_clip[0] = float("nan")
    elif case == "levels_unsorted":
        rs.k_levels[0] = torch.tensor([0.0, 2.0, 1.0, 3.0])
    elif case == "levels_nan":
        rs.v_levels[1, 2] = float("nan")
    elif case == "levels_out_of_range":
        rs.k_levels[1] = torch.tensor([-1.0, 1.0, 2.0, 7.0])
    elif case == "levels_wrong_count":
        rs.k_levels = rs.k_levels[:, :3]
    elif case == "eig_wrong_layers":
        rs.k_eigenvalues = rs.k_eigenvalues[:1]
    elif case == "eig_nan":
        rs.v_eigenvalues[0, 0, 5] = float("nan")
    elif case == "clip_wrong_layers":
        rs.v_clip = torch.full((3,), 0.9)
    elif case == "meta_layers":
        rs.meta["num_layers"] = 5
    with pytest.raises(RotationFileError) as e:
        _save_and_load(rs, tmp_path)
    msg = _one_line(e)
    assert match in msg or __import__("re").search(match, msg), msg
    assert "rot.safetensors" in msg and "oscar-kv calibrate" in msg


def test_zero_clip_means_off_and_is_accepted(tmp_path):
    rs = good_rotations()
    rs.k_clip[:] = 0.0
    rs.v_clip[:] = 1.0
    out = _save_and_load(rs, tmp_path)
    assert out.clip("k", 0) is None and out.clip("v", 1) is None


def test_in_memory_set_checked_by_cache(cfg):
    """A RotationSet built in code with a NaN rotation is refused by OscarCache, not blamed on the model."""
    from oscarkv.cache import OscarCache

    rs = good_rotations()
    rs.k_rotation[0, 0, 0, 0] = float("nan")
    with pytest.raises(RotationFileError, match="k_rotation .* contains NaN") as e:
        OscarCache(cfg, "oscar", rotations=rs)
    assert "non-finite activations" not in str(e.value)


def test_in_place_change_after_check_is_seen(cfg):
    rs = good_rotations()
    rs.check_model(cfg)
    rs.v_rotation.mul_(2.0)  # in place: the cached check must not hide it
    with pytest.raises(RotationFileError, match="v_rotation"):
        rs.check_model(cfg)


def test_v_rotation_count_checked_against_model(tmp_path):
    rs = good_rotations()
    rs.v_rotation = torch.linalg.qr(torch.randn(2, 3, 32, 32))[0]  # 3 per layer, model has 2 KV heads
    rs.v_eigenvalues = None
    with pytest.raises(InputError, match="3 V rotations per layer"):
        rs.check_model(tiny_config())


def test_rules_are_one_table():
    """Extending the format (e.g. centering vectors) means adding one entry here."""
    assert {"k_rotation", "v_rotation", "k_clip", "v_clip", "k_levels", "v_levels"} <= set(RULES)


# ------------------------------------------------------------------------------ RotationZoo .pt files
def _zoo(path, d=32, layers=2, bad_layer=None, bad=None):
    g = torch.Generator().manual_seed(0)
    entries = {}
    for i in range(layers):
        r = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0].float()
        if i == bad_layer:
            r = bad(r)
        entries[i] = {"rotation": r, "eigenvalues": torch.linspace(0.1, 5, d)}
    torch.save({"format_version": 1, "objective": "qqt_r_h_pbr", "source_grouping": "layer", "layers": entries}, path)
    return path


@pytest.mark.parametrize("bad, match", [
    (lambda r: torch.full_like(r, float("nan")), "layer 1 rotation .*contains NaN"),
    (lambda r: r * float("nan"), "contains NaN"),
    (lambda r: torch.randn_like(r), "layer 1 rotation .*is not orthogonal"),
    (lambda r: r.to(torch.int64), "dtype torch.int64"),
])
def test_zoo_bad_rotation_refused(tmp_path, bad, match):
    k = _zoo(tmp_path / "k.pt", bad_layer=1, bad=bad)
    v = _zoo(tmp_path / "v.pt")
    with pytest.raises(InputError, match=match) as e:
        import_rotationzoo(k, v, config=tiny_config())
    _one_line(e)


@pytest.mark.parametrize("clip", [1.5, -0.1, float("nan")])
def test_zoo_bad_clip_refused(tmp_path, clip):
    k, v = _zoo(tmp_path / "k.pt"), _zoo(tmp_path / "v.pt")
    with pytest.raises(RotationFileError, match="k_clip"):
        import_rotationzoo(k, v, k_clip=clip)


def test_zoo_layers_not_a_dict(tmp_path):
    p = tmp_path / "k.pt"
    torch.save({"format_version": 1, "layers": [1, 2]}, p)
    with pytest.raises(InputError, match="'layers' must be a dict"):
        import_rotationzoo(p, p)
    torch.save({"format_version": 1, "layers": {"a": {}}}, p)
    with pytest.raises(InputError, match="layer ids must be integers"):
        import_rotationzoo(p, p)


# ------------------------------------------------------------- format-2 fields (centering, key rescale)
def _with(rs, **fields):
    for k, v in fields.items():
        object.__setattr__(rs, k, v)
    return rs


def test_format2_rules_when_fields_exist():
    """The rules for k_mean / v_mean / k_query_rotation apply to any object carrying those fields."""
    from oscarkv.rotation.checks import problems

    rs = good_rotations()
    assert problems(_with(rs, k_mean=torch.zeros(2, 2, 32), v_mean=torch.zeros(2, 1, 32))) == []
    bad = _with(good_rotations(), k_mean=torch.full((2, 2, 32), float("nan")), v_mean=torch.zeros(2, 2, 32))
    assert any("k_mean (layer 0) contains NaN" in p for p in problems(bad))
    bad = _with(good_rotations(), k_mean=torch.zeros(2, 2, 32), v_mean=torch.zeros(3, 2, 32))
    assert any("v_mean has shape (3, 2, 32), expected (2, *, 32)" in p for p in problems(bad))
    # a non-orthogonal key transform M = S.R is fine when queries carry Q = S^-1.R (Q M^T = I)
    rs = good_rotations()
    s = torch.linspace(0.5, 2.0, 32)
    r = rs.k_rotation.clone()
    m, q = r * s[:, None], r / s[:, None]
    ok = _with(rs, k_rotation=m, k_query_rotation=q)
    assert problems(ok) == []
    wrong = _with(good_rotations(), k_rotation=m, k_query_rotation=r)
    assert any("does not invert k_rotation" in p for p in problems(wrong))
    alone = _with(good_rotations(), k_rotation=m)
    assert any("k_rotation (layer 0, rotation 0) is not orthogonal" in p for p in problems(alone))


@pytest.mark.parametrize("drop", ["v_clip", "k_clip", "v_levels", "k_levels", "v_mean"])
def test_k_and_v_halves_come_together(tmp_path, drop):
    """Before: a file with k_clip but no v_clip loaded, and the cache silently clipped K only (V got no
    clip, not even the paper's default); likewise levels (V uniform) and means (K centered, V not)."""
    rs = good_rotations(levels=True)
    rs.k_mean, rs.v_mean = torch.zeros(2, 1, 32), torch.zeros(2, 1, 32)
    setattr(rs, drop, None)
    with pytest.raises(RotationFileError, match=f"{drop} is missing while {'k' if drop[0] == 'v' else 'v'}{drop[1:]} is present"):
        _save_and_load(rs, tmp_path)
