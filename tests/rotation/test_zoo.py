import pytest
import torch

from oscarkv.rotation import RotationMismatchError, RotationSet, hadamard, import_rotationzoo


def _zoo(path, objective, layers=2, d=32, str_keys=False, rot=None):
    g = torch.Generator().manual_seed(0)
    entries = {}
    for i in range(layers):
        q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
        r = (q @ hadamard(d)).float() if rot is None else rot
        entries[str(i) if str_keys else i] = {"layer_id": i, "rotation": r.contiguous(),
                                              "eigenvalues": torch.linspace(0.1, 5, d)}
    torch.save({"format_version": 1, "objective": objective, "source_grouping": "layer", "layers": entries}, path)
    return path


def test_import_roundtrip(tmp_path, config):
    k = _zoo(tmp_path / "k_rotation_qqt_r_h_pbr.pt", "qqt_r_h_pbr")
    v = _zoo(tmp_path / "v_rotation_sst_r_h_pbr.pt", "sst_r_h_pbr", str_keys=True)
    rs = import_rotationzoo(k, v, config=config)
    assert rs.k_rotation.shape == (2, 1, 32, 32) and rs.v_eigenvalues.shape == (2, 1, 32)
    assert rs.clip("k", 1) == pytest.approx(0.96) and rs.clip("v", 0) == pytest.approx(0.92)
    assert rs.meta["composition"] == "u_h_pbr" and rs.meta["objective"] == "k=qqt_r_h_pbr,v=sst_r_h_pbr"
    torch.testing.assert_close(rs.k_rotation[1, 0], torch.load(k)["layers"][1]["rotation"])
    back = RotationSet.load(rs.save(tmp_path / "rot.safetensors"), config)
    torch.testing.assert_close(back.v_rotation, rs.v_rotation)
    assert import_rotationzoo(k, v, k_clip=None, v_clip=0).clip("k", 0) is None


def test_import_rejects_bad_files(tmp_path, make_config):
    k = _zoo(tmp_path / "k.pt", "qqt_r_h_pbr")
    with pytest.raises(ValueError, match="not orthogonal"):
        import_rotationzoo(k, _zoo(tmp_path / "v.pt", "sst", rot=torch.ones(32, 32)))
    with pytest.raises(ValueError, match="square"):
        import_rotationzoo(k, _zoo(tmp_path / "v2.pt", "sst", rot=torch.ones(32, 16)))
    with pytest.raises(ValueError, match="V file has 3"):
        import_rotationzoo(k, _zoo(tmp_path / "v3.pt", "sst", layers=3))
    with pytest.raises(RotationMismatchError, match="layers"):
        import_rotationzoo(k, _zoo(tmp_path / "v4.pt", "sst"), config=make_config(layers=4))
    torch.save({"format_version": 1, "layers": {0: {"rotation": torch.eye(32)}, 2: {"rotation": torch.eye(32)}}},
               tmp_path / "gap.pt")
    with pytest.raises(ValueError, match="layer ids"):
        import_rotationzoo(tmp_path / "gap.pt", k)
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(ValueError, match="not a RotationZoo file"):
        import_rotationzoo(tmp_path / "list.pt", k)
    with pytest.raises(FileNotFoundError):
        import_rotationzoo(tmp_path / "missing.pt", k)
