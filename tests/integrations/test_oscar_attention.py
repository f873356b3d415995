"""Path (a) (cache returns the original basis, stock SDPA) == path (b) (rotated K/V, "oscar_sdpa"
rotates q and the output) == path (b) with R_V^T absorbed into o_proj."""

import pytest
import torch
from transformers import DynamicCache

from oscarkv.cache import OscarCache
from oscarkv.integrations.transformers import (
    ATTENTION_NAME,
    disable_oscar_attention,
    enable_oscar_attention,
    track_padding,
)


def ids_of(n, batch=1, seed=0):
    return torch.randint(1, 100, (batch, n), generator=torch.Generator().manual_seed(seed))


def run(model, cache, ids, prefill=8, chunk=4):
    """Prefill, one multi-token chunk, then single tokens; all logits."""
    bounds = [(0, prefill), (prefill, prefill + chunk)] + [(t, t + 1) for t in range(prefill + chunk, ids.shape[1])]
    with torch.no_grad():
        return torch.cat([model(ids[:, a:e], cache=cache).logits for a, e in bounds], dim=1)


def paths(model, make_cache, ids):
    a = run(model, make_cache(), ids)
    out = [a]
    for absorb in (False, True):
        cache = make_cache()
        enable_oscar_attention(model, cache, absorb_v_into_o_proj=absorb)
        try:
            assert cache.output_basis == "rotated"
            out.append(run(model, cache, ids))
        finally:
            disable_oscar_attention(model)
        assert cache.output_basis == "original"
    return out


@pytest.mark.parametrize("per_head", [False, True])
def test_oscar_paths_give_the_same_logits(model, config, make_rotations, per_head):
    rot = make_rotations(config, per_head=per_head, seed=3)
    make = lambda: OscarCache(config, "oscar", rotations=rot, sink=3, recent=5)
    ids = ids_of(24)
    a, b, b_abs = paths(model, make, ids)
    assert (a - b).abs().max() < 1e-4
    assert (a - b_abs).abs().max() < 1e-4
    # the rotation matters: the same INT2 without it gives other logits
    naive = run(model, OscarCache(config, "naive", sink=3, recent=5), ids)
    assert (a - naive).abs().max() > 1e-3


@pytest.mark.parametrize("name", ["bf16", "hadamard", "int4", "kivi"])
def test_other_methods_through_the_oscar_path(model, config, name):
    make = lambda: OscarCache(config, name, sink=2, recent=4, group_size=4 if name == "kivi" else 32)
    a, b, b_abs = paths(model, make, ids_of(20, seed=1))
    assert (a - b).abs().max() < 1e-4 and (a - b_abs).abs().max() < 1e-4


def test_disable_restores_the_model(model, config, rotations):
    w = [m.self_attn.o_proj.weight.detach().clone() for m in model.model.layers]
    cache = OscarCache(config, "oscar", rotations=rotations)
    enable_oscar_attention(model, cache, absorb_v_into_o_proj=True)
    assert model.config._attn_implementation == ATTENTION_NAME
    assert not torch.equal(model.model.layers[0].self_attn.o_proj.weight, w[0])
    disable_oscar_attention(model)
    assert model.config._attn_implementation == "sdpa"
    assert all(torch.equal(m.self_attn.o_proj.weight, wi) for m, wi in zip(model.model.layers, w))
    assert not hasattr(model.model.layers[0].self_attn, "_oscar_attention")


@pytest.mark.parametrize("o_bias", [False, True])
def test_centered_values_mean_folded_into_o_proj_bias(config, make_rotations, o_bias):
    """With values stored centered, absorbing R_V^T also moves mu_V's share of the output into o_proj's bias
    (value_mean_bias): same logits as the explicit path; disable restores the bias (none, or the model's own)."""
    import copy

    from tinymodels import tiny_model

    model = tiny_model()
    if o_bias:  # a model whose o_proj has a bias of its own
        for lyr in model.model.layers:
            o = lyr.self_attn.o_proj
            o.bias = torch.nn.Parameter(0.1 * torch.randn(o.out_features, generator=torch.Generator().manual_seed(1)))
    before = [None if lyr.self_attn.o_proj.bias is None else lyr.self_attn.o_proj.bias.detach().clone()
              for lyr in model.model.layers]
    rot = copy.copy(make_rotations(config, seed=3))
    g = torch.Generator().manual_seed(9)
    n, h, d = config.num_hidden_layers, config.num_key_value_heads, config.head_dim
    rot.k_mean, rot.v_mean = 0.5 * torch.randn(n, h, d, generator=g), 0.5 * torch.randn(n, h, d, generator=g)
    make = lambda: OscarCache(config, "oscar+center", rotations=rot, sink=3, recent=5)  # noqa: E731
    ids = ids_of(24)
    explicit = make()
    enable_oscar_attention(model, explicit)
    try:
        b = run(model, explicit, ids)
    finally:
        disable_oscar_attention(model)
    cache = make()
    enable_oscar_attention(model, cache, absorb_v_into_o_proj=True)
    try:
        assert all(lyr.self_attn._oscar_attention.mean_in_bias for lyr in model.model.layers)
        assert model.model.layers[0].self_attn.o_proj.bias is not None
        b_abs = run(model, cache, ids)
    finally:
        disable_oscar_attention(model)
    assert (b - b_abs).abs().max() < 1e-4
    for lyr, bias in zip(model.model.layers, before):
        got = lyr.self_attn.o_proj.bias
        assert (got is None) if bias is None else torch.equal(got, bias)


def test_generate_through_the_oscar_path(model, config, rotations):
    prompt = ids_of(7, seed=2)
    kw = dict(max_new_tokens=12, do_sample=False, output_logits=True, return_dict_in_generate=True)
    make = lambda: OscarCache(config, "oscar", rotations=rotations, sink=2, recent=3)
    ref = model.generate(prompt, cache=make(), **kw)
    cache = make()
    enable_oscar_attention(model, cache, absorb_v_into_o_proj=True)
    try:
        got = model.generate(prompt, cache=cache, **kw)
    finally:
        disable_oscar_attention(model)
    assert torch.equal(got.sequences, ref.sequences)
    assert max((x - y).abs().max() for x, y in zip(got.logits, ref.logits)) < 1e-4


def test_padding_hook_in_generate(model, config, rotations):
    prompts = [ids_of(9, seed=4), ids_of(4, seed=5)]
    ids = torch.zeros(2, 9, dtype=torch.long)
    mask = torch.zeros(2, 9, dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, 9 - p.shape[1]:], mask[b, 9 - p.shape[1]:] = p[0], 1
    kw = dict(max_new_tokens=8, do_sample=False, output_logits=True, return_dict_in_generate=True, pad_token_id=0)
    make = lambda: OscarCache(config, "oscar", rotations=rotations, sink=2, recent=3)
    cache = make()
    enable_oscar_attention(model, cache)  # installs track_padding too
    try:
        batched = model.generate(ids, attention_mask=mask, cache=cache, **kw)
    finally:
        disable_oscar_attention(model)
    assert torch.equal(cache.layers[0].pad, torch.tensor([0, 5]))
    for b, p in enumerate(prompts):
        alone = model.generate(p, cache=make(), **kw)
        assert torch.equal(batched.sequences[b, 9:], alone.sequences[0, p.shape[1]:])
        assert max((lb[b] - la[0]).abs().max() for lb, la in zip(batched.logits, alone.logits)) < 1e-4


def test_track_padding_for_the_default_path(model, config):
    handle = track_padding(model)
    try:
        cache = OscarCache(config, "naive", sink=2, recent=3)
        mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
        with torch.no_grad():
            model(ids_of(5, batch=2), attention_mask=mask, cache=cache)
        assert torch.equal(cache.layers[1].pad, torch.tensor([2, 0]))
    finally:
        handle.remove()


def test_wrong_cache_is_refused(model, config, rotations):
    cache = OscarCache(config, "oscar", rotations=rotations)
    enable_oscar_attention(model, cache)
    try:
        with torch.no_grad(), pytest.raises(RuntimeError, match="did not come from it"):
            model(ids_of(4), cache=DynamicCache(config=config))
        with torch.no_grad(), pytest.raises(RuntimeError, match="did not come from it"):
            model(ids_of(4), use_cache=False)
    finally:
        disable_oscar_attention(model)
    with pytest.raises(TypeError, match="OscarCache"):
        enable_oscar_attention(model, DynamicCache(config=config))


def test_bfloat16_model(config, rotations):
    """Model-dtype windows and bf16 rotation GEMMs, as on GPU: both paths run and agree loosely."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    m = LlamaForCausalLM(config).eval().to(torch.bfloat16)
    make = lambda: OscarCache(config, "oscar", rotations=rotations, sink=2, recent=3)
    a, b, b_abs = paths(m, make, ids_of(16, seed=6))
    assert a.dtype == torch.bfloat16
    assert (a - b).abs().max() < 0.05 and (a - b_abs).abs().max() < 0.05
    cache = make()
    run(m, cache, ids_of(16, seed=6))
    assert cache.layers[0].sink_k.dtype == torch.bfloat16
