import os

import pytest
import torch

from oscarkv.rotation import RotationMismatchError, RotationSet, config_hash, hadamard


def _rs(config, d=32):
    layers = config.num_hidden_layers
    h = hadamard(d, torch.float32)
    return RotationSet(
        k_rotation=h.expand(layers, 1, d, d).clone(), v_rotation=h.expand(layers, 1, d, d).clone(),
        k_clip=torch.full((layers,), 0.96), v_clip=torch.full((layers,), 0.92),
        meta={"model_id": "tiny", "config_hash": config_hash(config), "calib_tokens": 123},
    )


def test_save_load_roundtrip(tmp_path, config):
    p = _rs(config).save(tmp_path / "rot.safetensors")
    rs = RotationSet.load(p, config)
    assert torch.equal(rs.k_rotation, _rs(config).k_rotation)
    assert rs.meta["calib_tokens"] == 123 and rs.meta["model_id"] == "tiny"
    assert rs.clip("k", 0) == pytest.approx(0.96) and rs.clip("v", 1) == pytest.approx(0.92)
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


def test_load_refuses_other_model(tmp_path, config, make_config):
    p = _rs(config).save(tmp_path / "rot.safetensors")
    with pytest.raises(RotationMismatchError, match="3 in the model"):
        RotationSet.load(p, make_config(layers=3))


def test_load_refuses_garbage(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="not a readable safetensors"):
        RotationSet.load(bad)
    with pytest.raises(FileNotFoundError, match="oscar-kv calibrate"):
        RotationSet.load(tmp_path / "missing.safetensors")
