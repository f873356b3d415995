"""The attention-weighted query covariance (build_rotations(key_weighting="attention"), issue 10): queries
weighted by their attention mass p (1 - p) on the keys the cache holds quantized."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from oscarkv.calibrate import build_rotations, collect_stats
from oscarkv.calibrate.core import held_mask
from oscarkv.calibrate.stats import QueryCovariance, attention_mass
from oscarkv.errors import InputError


def test_attention_mass_matches_a_direct_softmax():
    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 40, 8), torch.randn(1, 2, 40, 8)
    held = held_mask(40, (4, 8, 1))
    assert held[20].nonzero().flatten().tolist() == list(range(4, 13))  # sink 4, 21 tokens - 4 - 8 = 9 in INT2
    a = attention_mass(q, k, held)
    for h, i in ((0, 20), (3, 39), (1, 5)):
        s = (q[0, h] @ k[0, h // 2].T) * 8**-0.5
        p = s.masked_fill(torch.ones(40, 40).triu(1).bool(), float("-inf")).softmax(-1)[i]
        assert a[0, h, i].item() == pytest.approx(float((p * (1 - p) * held[i]).sum()), rel=1e-5)
    assert a[0, :, :12].abs().max() == 0 and (a[0, :, 12] > 0).all()  # first INT2 key at 4 + 8 + 1 tokens


def test_unit_weights_give_the_plain_query_covariance():
    q = torch.randn(2, 4, 16, 8)
    plain, weighted = QueryCovariance(2, 8), QueryCovariance(2, 8)
    plain.update(q)
    weighted.update(q, torch.full((2, 4, 16), 0.3))
    torch.testing.assert_close(weighted.per_head(), plain.per_head())


def test_build_rotations_with_attention_weighting():
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32, num_hidden_layers=1,
                      intermediate_size=64, vocab_size=50)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 50, (512,), generator=torch.Generator().manual_seed(1))
    plain_stats = collect_stats(model, ids, seq_len=256, sample_tokens=256, progress=False)
    with pytest.raises(InputError, match="attention weights"):
        build_rotations(plain_stats, group_size=32, key_weighting="attention")
    st = collect_stats(model, ids, seq_len=256, sample_tokens=256, progress=False, attn_windows=(16, 32, 1))
    torch.testing.assert_close(st.cq[0], plain_stats.cq[0])
    assert not torch.allclose(st.cq_attn[0], st.cq[0])
    rs = build_rotations(st, group_size=32, center=True, key_weighting="attention")
    assert rs.meta["key_weighting"] == "attention" and rs.meta["attn_windows"] == [16, 32, 1]
    assert "key_weighting" not in build_rotations(st, group_size=32, center=True).meta
