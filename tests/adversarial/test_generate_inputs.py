"""Issue 11, the newest entry points: ``oscarkv.cache.graph.generate`` / ``GraphDecoder`` and
``enable_oscar_attention`` / ``fuse_projections``. Bad arguments are refused in one line *before* the
prefill (the cache stays empty and usable), never as a traceback from inside the model or half-way
through the decode loop, and never silently (a temperature of 0 used to sample at 1e-5, an end token
outside the vocabulary never stopped anything)."""

import contextlib

import os

import pytest
import torch
from tinymodels import tiny_model

from oscarkv.cache import OscarCache
from oscarkv.cache.graph import GraphDecoder, generate
from oscarkv.errors import InputError, StateError
from oscarkv.integrations.transformers import (disable_oscar_attention, enable_oscar_attention, fuse_projections,
                                               unfuse_projections)

KW = dict(sink=16, recent=16, group_size=32)
IDS = torch.arange(1, 21)[None]  # [1, 20], vocabulary 100


@contextlib.contextmanager
def _enabled(model, config, rotations, **kw):
    """A paged cache with oscar attention enabled on ``model``, disabled again on exit (also on failure)."""
    c = OscarCache(config, "oscar", rotations=rotations, backend="paged", **KW, **kw)
    enable_oscar_attention(model, c)
    try:
        yield c
    finally:
        disable_oscar_attention(model)


def _untouched(c):
    return c.get_seq_length() == 0 and c.paged.mgr is None


BAD = [
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(max_new_tokens=-1), "max_new_tokens"),
    (dict(max_new_tokens=2.5), "max_new_tokens"),
    (dict(max_new_tokens=True), "max_new_tokens"),
    (dict(do_sample=True, temperature=0), "temperature"),
    (dict(do_sample=True, temperature=-1.0), "temperature"),
    (dict(do_sample=True, temperature=float("nan")), "temperature"),
    (dict(do_sample=True, top_k=-3), "top_k"),
    (dict(do_sample=True, top_k=2.5), "top_k"),
    (dict(eos_token_id=100), "eos_token_id"),
    (dict(eos_token_id=-1), "eos_token_id"),
    (dict(eos_token_id=[]), "eos_token_id"),
    (dict(eos_token_id=[3, 1000]), "eos_token_id"),
    (dict(eos_token_id="2"), "eos_token_id"),
    (dict(eos_token_id=2, pad_token_id=100), "pad_token_id"),
    (dict(eos_token_id=2, pad_token_id=-1), "pad_token_id"),
]


@pytest.mark.parametrize("kw, match", BAD)
def test_generate_arguments_refused_before_prefill(model, config, rotations, kw, match):
    with _enabled(model, config, rotations) as c:
        with pytest.raises(InputError, match=match):
            generate(model, c, IDS, use_graph=False, **{"max_new_tokens": 3, **kw})
        assert _untouched(c)


def test_numpy_and_tensor_eos_ids_accepted(model, config, rotations):
    import numpy as np

    for eos in (np.int64(2), torch.tensor([2, 3]), (2, np.int32(3))):
        with _enabled(model, config, rotations) as c:
            assert generate(model, c, IDS, max_new_tokens=2, eos_token_id=eos, use_graph=False).shape[0] == 1


def test_top_k_zero_means_off_as_in_transformers(model, config, rotations):
    with _enabled(model, config, rotations) as c:
        torch.manual_seed(0)
        a = generate(model, c, IDS, max_new_tokens=3, do_sample=True, top_k=0, use_graph=False)
        assert a.shape == (1, 3)


@pytest.mark.parametrize("ids, mask, match", [
    (IDS[0], None, "input_ids must be"),                          # 1-D
    (IDS.float(), None, "integer"),                               # float ids
    (IDS[:, :0], None, "at least one token"),                     # empty prompt
    (IDS + 95, None, r"\[0, 100\)"),                              # ids past the vocabulary
    (IDS, torch.ones(2, 20, dtype=torch.long), "attention_mask"),  # mask batch
    (IDS, torch.ones(1, 19, dtype=torch.long), "attention_mask"),  # mask length
])
def test_generate_inputs_refused_before_prefill(model, config, rotations, ids, mask, match):
    with _enabled(model, config, rotations) as c:
        with pytest.raises(InputError, match=match):
            generate(model, c, ids, mask, max_new_tokens=3, use_graph=False)
        assert _untouched(c)


def test_generate_with_a_model_not_enabled_with_this_cache(model, config, rotations):
    """Before: a model enabled with no cache, or with another one, ran the whole prefill (attending
    rotated K/V with the plain attention, silently) before GraphDecoder refused it."""
    other = tiny_model(seed=1)
    with _enabled(model, config, rotations) as c:
        with pytest.raises(StateError, match="enable_oscar_attention"):
            generate(other, c, IDS, max_new_tokens=3, use_graph=False)
        assert _untouched(c)
        c2 = OscarCache(config, "oscar", rotations=rotations, backend="paged", **KW)
        with pytest.raises(StateError, match="another OscarCache"):
            generate(model, c2, IDS, max_new_tokens=3, use_graph=False)
        assert _untouched(c2)


def test_graph_decoder_step_checks_tokens(model, config, rotations):
    with _enabled(model, config, rotations) as c:
        with torch.no_grad():
            model(IDS, cache=c, use_cache=True)
        dec = GraphDecoder(model, c, use_graph=False)
        with pytest.raises(InputError, match="one token per row"):
            dec.step(torch.tensor([1, 2]))  # batch 1
        with pytest.raises(InputError, match="integer"):
            dec.step(torch.tensor([1.7]))  # was silently truncated to token 1
        assert dec.step(torch.tensor([5])).shape == (1, 100)  # the refusals changed nothing


def test_graph_decoder_refuses_a_cache_the_model_is_not_enabled_with(model, config, rotations):
    with _enabled(model, config, rotations) as a:
        b = OscarCache(config, "oscar", rotations=rotations, backend="paged", **KW)
        with torch.no_grad():
            model(IDS, cache=a, use_cache=True)
        enable_oscar_attention(model, b)
        with torch.no_grad():
            model(IDS, cache=b, use_cache=True)
        enable_oscar_attention(model, a)
        with pytest.raises(StateError, match="another OscarCache"):
            GraphDecoder(model, b, use_graph=False)


@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("over, what", [(dict(head_dim=64), "head_dim"), (dict(num_key_value_heads=4), "KV heads")])
def test_enable_refuses_a_cache_of_another_shape_and_changes_nothing(config, absorb, over, what):
    """Before: with absorb_v_into_o_proj=True a head_dim mismatch was a matmul traceback from inside
    the o_proj fold, after the model's attention implementation had already been switched (so the
    model then refused every plain forward)."""
    m = tiny_model(**over)
    c = OscarCache(config, "hadamard", backend="paged", **KW)
    attn = m.config._attn_implementation
    w = m.model.layers[0].self_attn.o_proj.weight.clone()
    with pytest.raises(InputError, match=what):
        enable_oscar_attention(m, c, absorb_v_into_o_proj=absorb)
    assert m.config._attn_implementation == attn and getattr(m, "_oscar_enabled", None) is None
    assert torch.equal(m.model.layers[0].self_attn.o_proj.weight, w)
    m(IDS)  # still a plain model


def test_fused_projections_follow_to():
    """Before: ``.to(dtype)`` after ``fuse_projections`` converted the per-projection views but not the
    fused weight the GEMM reads, so the next forward failed with a dtype mismatch from inside F.linear
    (and an in-place change to a converted weight would no longer reach the GEMM)."""
    m = tiny_model()
    want = m(IDS).logits.double()
    fuse_projections(m)
    m.to(torch.float64)
    got = m(IDS).logits
    assert got.dtype == torch.float64 and (got - want).abs().max() < 1e-4
    attn = m.model.layers[0].self_attn
    assert attn.q_proj.fused_weight is attn.v_proj.fused_weight  # still one shared weight
    assert attn.v_proj.weight.data_ptr() != attn.q_proj.weight.data_ptr()
    with torch.no_grad():
        attn.v_proj.weight.zero_()  # in place on a view: the fused GEMM sees it
    assert attn.v_proj(torch.randn(1, 128, dtype=torch.float64)).abs().max() == 0
    assert attn.q_proj.fused_weight[-attn.v_proj.out_features:].abs().max() == 0
    assert unfuse_projections(m) == 5 * 2


TRITON_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"  # as the test session started (CI sets it)


def test_triton_on_cpu_without_interpreter_refused_before_writing(model, config, rotations, monkeypatch):
    """Before: refused by the first write_kv inside layer 0, which marked the cache broken for good."""
    with _enabled(model, config, rotations, kernel_backend="triton") as c:
        monkeypatch.setenv("TRITON_INTERPRET", "0")
        with pytest.raises(StateError, match="TRITON_INTERPRET=1"):
            generate(model, c, IDS, max_new_tokens=3, use_graph=False)
        assert c.paged.broken is None and c.get_seq_length() == 0 and c.paged.mgr is None
        if not TRITON_INTERPRETED:  # triton was imported for a GPU (the device run): it cannot run CPU tensors
            return
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        c.set_padding(None)
        assert generate(model, c, IDS, max_new_tokens=2, use_graph=False).shape == (1, 2)  # still usable


def test_compile_without_a_cpp_compiler_refused_before_prefill(model, config, rotations):
    """Before: an inductor traceback at the first compiled decode step, after the prefill."""
    import torch._inductor.config as inductor_config

    from oscarkv.errors import UnsupportedError

    with _enabled(model, config, rotations) as c:
        # torch's own patch (monkeypatch would delete the config entry on undo)
        with inductor_config.patch({"cpp.cxx": ("no-such-cxx-compiler-oscarkv",)}), \
                pytest.raises(UnsupportedError, match="needs a C\\+\\+ compiler"):
            generate(model, c, IDS, max_new_tokens=3, use_graph=False, compile=True)
        assert _untouched(c)


def test_generate_twice_names_the_fix(model, config, rotations):
    with _enabled(model, config, rotations) as c:
        generate(model, c, IDS, max_new_tokens=2, use_graph=False)
        with pytest.raises(StateError, match="holds 21 tokens: create a new OscarCache"):
            generate(model, c, IDS, max_new_tokens=2, use_graph=False)


def test_generate_past_the_default_capacity_refused_before_prefill(model, config, rotations):
    """Before: without max_tokens the pools hold prompt + 4096 tokens, and generate found out at step 4097."""
    with _enabled(model, config, rotations) as c:
        with pytest.raises(StateError, match=r"max_tokens=4116 \(the default: prompt \+ 4096\)"):
            generate(model, c, IDS, max_new_tokens=5000, use_graph=False)
        assert _untouched(c)
