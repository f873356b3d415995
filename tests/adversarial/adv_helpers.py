"""Shared builders and fixtures for the adversarial tests (no conftest.py here: tests/kernels imports
``from conftest import ...``, which another conftest module would shadow). The tiny model builders are
tests/tinymodels.py's; the one-thread fixture is tests/conftest.py's (autouse)."""

import pytest
import torch
from tinymodels import tiny_checkpoint, tiny_config  # noqa: F401 (re-exported to the tests)

from oscarkv.rotation import RotationSet, config_hash


def good_rotations(layers=2, d=32, per_head=False, levels=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = 2 if per_head else 1
    orth = lambda: torch.linalg.qr(torch.randn(layers, r, d, d, generator=g, dtype=torch.float64))[0].float()  # noqa: E731
    kw = {}
    if levels:
        kw = dict(k_levels=torch.tensor([[0.0, 0.9, 2.1, 3.0]] * layers), v_levels=torch.tensor([[0.0, 1.1, 1.9, 3.0]] * layers))
    return RotationSet(k_rotation=orth(), v_rotation=orth(), k_eigenvalues=torch.rand(layers, r, d),
                       v_eigenvalues=torch.rand(layers, r, d), k_clip=torch.full((layers,), 0.96),
                       v_clip=torch.full((layers,), 0.92),
                       meta={"model_id": "tiny", "config_hash": config_hash(tiny_config(layers)), "num_layers": layers,
                             "head_dim": d, "bits": 2}, **kw)



@pytest.fixture
def cfg():
    return tiny_config()


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny"), max_positions=256)


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail the test if a command gets as far as loading the model."""
    from oscarkv.cli import commands

    def boom(*a, **k):
        raise AssertionError("the model was loaded before the arguments were checked")
    monkeypatch.setattr(commands, "_load", boom)


def one_line_error(capsys) -> str:
    """The CLI's stderr, progress lines aside: exactly one line (no traceback)."""
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines() if not line.startswith("[oscar-kv]")]
    assert len(lines) == 1, err
    return lines[0]
