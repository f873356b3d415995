"""Issue 11 item 5 (Python API): OscarCache and KVMethod refuse what they would otherwise silently ignore,
and a failed update leaves the cache as it was."""

import pytest
import torch

from oscarkv.cache import OscarCache
from oscarkv.errors import InputError, OscarKVError
from oscarkv.methods import KVMethod, make_method

from adv_helpers import cfg, good_rotations, tiny_config


def test_levels_typo_refused():
    with pytest.raises(InputError, match="levels='lloyd_max' is not one of 'uniform', 'lloyd-max'"):
        make_method("oscar", levels="lloyd_max")
    with pytest.raises(InputError, match="levels='lloyd_max'"):
        KVMethod("oscar", rotation="calibrated", levels="lloyd_max")
    with pytest.raises(InputError, match="levels"):
        OscarCache(tiny_config(), "naive", levels="lloyd_max")


@pytest.mark.parametrize("kw, match", [
    (dict(bits=3), "bits=3"), (dict(rotation="hadamrd"), "rotation='hadamrd'"), (dict(key_axis="row"), "key_axis"),
    (dict(clip="fited"), "clip='fited'"), (dict(sink=-1), "sink must be an integer >= 0"),
    (dict(group_size=0), "group_size must be an integer >= 1"), (dict(recent=2.5), "recent must be an integer"),
    (dict(scale_dtype="float8"), "scale_dtype='float8'"),
])
def test_kvmethod_fields_checked(kw, match):
    with pytest.raises(InputError, match=match):
        KVMethod("x", **kw)


def test_explicit_keywords_override_a_kvmethod():
    m = make_method("naive", sink=64, recent=256)
    c = OscarCache(tiny_config(), m, sink=0, recent=8)
    assert (c.method.sink, c.method.recent) == (0, 8)
    assert OscarCache(tiny_config(), m).method is m  # nothing given: the method as is


def test_method_of_wrong_type_refused():
    with pytest.raises(InputError, match="method must be a name"):
        OscarCache(tiny_config(), 42)


def test_rotations_as_path(tmp_path):
    p = good_rotations().save(tmp_path / "r.safetensors")
    c = OscarCache(tiny_config(), "oscar", rotations=str(p))
    assert c.rotations.num_layers == 2
    c = OscarCache(tiny_config(), "oscar", rotations=p)
    with pytest.raises(InputError, match="rotations must be a RotationSet or the path"):
        OscarCache(tiny_config(), "oscar", rotations=42)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        OscarCache(tiny_config(), "oscar", rotations=str(tmp_path / "missing.safetensors"))


@pytest.mark.parametrize("method", ["naive", "oscar", "kivi"])
def test_failed_update_leaves_length(method):
    cfg = tiny_config()
    rot = good_rotations() if method == "oscar" else None
    g = 4 if method == "kivi" else 32
    t = 6  # kivi demotes whole 4-token key blocks
    c = OscarCache(cfg, method, rotations=rot, sink=0, recent=2, group_size=g, page=1)
    k = torch.randn(1, 2, t, 32)
    v = torch.randn(1, 2, t, 32)
    bad = k.clone()
    bad[0, 0, 0, 0] = float("nan")  # token 0 leaves the recent window in this same call: quantized -> raises
    with pytest.raises(OscarKVError, match="NaN"):
        c.update(bad, v, 0)
    assert c.get_seq_length(0) == 0 and c.layers[0].get_seq_length() == 0
    with pytest.raises(OscarKVError):
        c.update(bad, v, 0)  # same failure again, still nothing stored
    assert c.get_seq_length(0) == 0
    ko, vo = c.update(k, v, 0)  # the cache still works
    assert ko.shape[2] == t and c.get_seq_length(0) == t
    c.update(k[:, :, :1], v[:, :, :1], 0)
    assert c.get_seq_length(0) == t + 1
    c2 = OscarCache(cfg, method, rotations=rot, sink=0, recent=2, group_size=g, page=1)
    c2.update(k, v, 0)
    c2.update(k[:, :, :1], v[:, :, :1], 0)
    assert c2.layers[0].segments() == c.layers[0].segments()


@pytest.mark.parametrize("k_shape, v_shape, layer, match", [
    ((1, 2, 3, 16), (1, 2, 3, 16), 0, r"key_states must be \[batch, 2 KV heads, tokens, 32\]"),
    ((1, 4, 3, 32), (1, 4, 3, 32), 0, "KV heads"),
    ((1, 2, 3, 32), (1, 2, 2, 32), 0, "differ in batch or tokens"),
    ((2, 32), (2, 32), 0, "key_states must be"),
    ((1, 2, 3, 32), (1, 2, 3, 32), 5, "layer_idx 5 is out of range"),
])
def test_update_shapes_checked(k_shape, v_shape, layer, match):
    c = OscarCache(tiny_config(), "naive", sink=0, recent=2, group_size=32)
    with pytest.raises(InputError, match=match):
        c.update(torch.randn(k_shape), torch.randn(v_shape), layer)
    assert c.get_seq_length(0) == 0


@pytest.mark.parametrize("make, match", [
    (lambda: __import__("oscarkv.quant", fromlist=["QuantConfig"]).QuantConfig(levels=(0, float("nan"), 2, 3)), "levels must be finite"),
    (lambda: __import__("oscarkv.quant", fromlist=["QuantConfig"]).QuantConfig(clip_ratio=2.0), "clip_ratio must be in"),
    (lambda: __import__("oscarkv.quant", fromlist=["QuantConfig"]).QuantConfig(clip_ratio=float("nan")), "clip_ratio must be in"),
    (lambda: __import__("oscarkv.data", fromlist=["load_text"]).load_text(""), "empty text source"),
    (lambda: __import__("oscarkv.rotation", fromlist=["RotationSet"]).RotationSet([[1.0]], [[1.0]]), "must be a torch.Tensor"),
])
def test_api_values_refused(make, match):
    with pytest.raises(InputError, match=match):
        make()


@pytest.mark.parametrize("backend", ["reference", "paged"])
def test_another_batch_on_a_filled_cache_refused(model, config, rotations, backend):
    """Before: a forward with another batch size on a non-empty cache was a torch.cat traceback from the
    layers (reference) or an IndexError from the paged decode, which also left the paged cache broken."""
    from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention

    c = OscarCache(config, "oscar", rotations=rotations, backend=backend, sink=16, recent=16, group_size=32)
    enable_oscar_attention(model, c)
    try:
        ids = torch.randint(1, 100, (1, 20))
        with torch.no_grad():
            model(ids, cache=c, use_cache=True)
            with pytest.raises(InputError, match="holds a batch of 1 rows"):
                model(torch.ones(2, 1, dtype=torch.long), cache=c, use_cache=True)
            assert c.get_seq_length() == 20
            assert model(ids[:, :1], cache=c, use_cache=True).logits.shape == (1, 1, 100)  # still usable
    finally:
        disable_oscar_attention(model)


@pytest.mark.parametrize("backend", ["reference", "paged"])
def test_enabled_cache_used_by_another_model_refused(config, rotations, backend):
    """Before: ``enable_oscar_attention(model_a, cache)`` then ``model_b.generate(..., cache=cache)`` ran
    model_b's plain attention on the rotated keys: silently wrong logits on the reference backend (max
    difference 1.03 on the tiny model), an error only at the second forward on the paged one."""
    from tinymodels import tiny_model

    from oscarkv.errors import StateError
    from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention

    a, b = tiny_model(), tiny_model()
    ids = torch.randint(1, 100, (1, 40), generator=torch.Generator().manual_seed(1))
    c = OscarCache(config, "oscar", rotations=rotations, backend=backend, sink=16, recent=16, group_size=32)
    enable_oscar_attention(a, c)
    try:
        with pytest.raises(StateError, match="does not use the OSCAR attention"):
            b.generate(ids, cache=c, max_new_tokens=3, do_sample=False, pad_token_id=0)
        if backend == "reference":  # put back as it was: still usable by the enabled model
            assert c.get_seq_length() == 0 and all(layer.get_seq_length() == 0 for layer in c.layers)
            got = a.generate(ids, cache=c, max_new_tokens=3, do_sample=False, pad_token_id=0)
            fresh = OscarCache(config, "oscar", rotations=rotations, sink=16, recent=16, group_size=32)
            enable_oscar_attention(a, fresh)
            assert torch.equal(got, a.generate(ids, cache=fresh, max_new_tokens=3, do_sample=False, pad_token_id=0))
    finally:
        disable_oscar_attention(a)
