"""The one-pass evaluation (banded attention) equals real step-by-step decoding through OscarCache."""

import pytest
import torch

from oscarkv.cache import OscarCache
from oscarkv.eval.banded import banded_logits
from oscarkv.methods import make_method
from oscarkv.rotation import RotationSet, config_hash


@pytest.fixture(scope="module")
def setup(tiny):
    model = tiny()
    cfg = model.config
    g = torch.Generator().manual_seed(1)
    orth = lambda: torch.linalg.qr(torch.randn(2, 1, 32, 32, generator=g))[0]  # noqa: E731
    rot = RotationSet(k_rotation=orth(), v_rotation=orth(), k_clip=torch.full((2,), 0.9),
                      v_clip=torch.full((2,), 0.85), meta={"config_hash": config_hash(cfg)})
    ids = torch.randint(0, 100, (1, 45), generator=g)
    return model, rot, ids


def decode_step_by_step(model, cache, ids, prefill=1):
    outs = []
    with torch.no_grad():
        out = model(ids[:, :prefill], past_key_values=cache, use_cache=True)
        outs.append(out.logits)
        for t in range(prefill, ids.shape[1]):
            outs.append(model(ids[:, t : t + 1], past_key_values=cache, use_cache=True).logits)
    return torch.cat(outs, 1)


@pytest.mark.parametrize("name", ["bf16", "naive", "hadamard", "kivi", "int4", "oscar"])
@pytest.mark.parametrize("sink,recent", [(4, 8), (0, 0), (3, 1)])
def test_banded_equals_decoding(setup, name, sink, recent):
    model, rot, ids = setup
    method = make_method(name, sink=sink, recent=recent, group_size=16)
    fast = banded_logits(model, ids, method, rot)
    cache = OscarCache(model.config, method, rotations=rot)
    slow = decode_step_by_step(model, cache, ids)
    assert (fast - slow).abs().max().item() < 1e-4
    if name != "bf16":  # and quantization did change something
        ref = banded_logits(model, ids, make_method("bf16"))
        assert (fast - ref).abs().max().item() > 1e-3
