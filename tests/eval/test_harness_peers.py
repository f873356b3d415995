"""transformers' QuantizedCache peers go through the harness with the interface of our methods."""

import pytest
import torch

from oscarkv.eval.harness import PeerMethod, evaluate
from oscarkv.methods import make_method


def test_peer_accounting_and_name():
    p = PeerMethod("hqq", residual=256)
    assert p.name == "hf-hqq-int2"
    # 2-bit codes + 16-bit scale and zero per 64 values on the quantized part, 16 bits on the residual
    assert p.bits_per_element(4096, 64) == pytest.approx(((4096 - 256) * 2.5 + 256 * 16) / 4096)
    assert p.kv_bytes(4096, 2, 3, 64) == round(2 * 4096 * 2 * 3 * 64 * p.bits_per_element(4096, 64) / 8)
    with pytest.raises(ValueError, match="unknown peer"):
        PeerMethod("gptq")


def test_evaluate_with_a_peer(tiny):
    model = tiny()
    ids = torch.randint(0, 100, (64,), generator=torch.Generator().manual_seed(0))
    res = evaluate(model, ids, [make_method("bf16")], context=64, score_from=16, peers=("hqq",),
                   peer_residual=8, progress=False)
    rows = {r["method"]: r for r in res["results"]}
    assert set(rows) == {"bf16", "hf-hqq-int2"}
    assert "residual_length=8" in rows["hf-hqq-int2"]["note"] and rows["hf-hqq-int2"]["kl"] >= 0
