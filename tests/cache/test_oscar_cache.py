import warnings

import pytest
import torch
from transformers import DynamicCache

from oscarkv.cache import OscarCache, RowStore
from oscarkv.methods import make_method
from oscarkv.quant import quantize, QuantConfig
from oscarkv.rotation import RotationMismatchError


def ids_of(n, batch=1, seed=0):
    return torch.randint(1, 100, (batch, n), generator=torch.Generator().manual_seed(seed))


def step(model, cache, ids):
    with torch.no_grad():
        return model(ids, cache=cache).logits


# ------------------------------------------------------------------ bookkeeping
@pytest.mark.parametrize("name", ["naive", "hadamard", "int4", "kivi"])
def test_segments_follow_the_rule_through_prefill_and_decode(model, name):
    method = make_method(name, sink=4, recent=6, group_size=4)
    cache = OscarCache(model.config, method)
    ids = ids_of(40)
    step(model, cache, ids[:, :20])
    for t in range(20, 40):
        n = cache.get_seq_length()
        for layer in range(len(cache.layers)):
            seg = cache.segments(layer)
            assert seg["total"] == n
            assert seg["sink"] == min(n, 4)
            assert seg["quantized"] == method.quantized_tokens(n)
            assert seg["recent"] == min(6, n - 4)
            assert seg["sink"] + seg["quantized"] + seg["residual"] + seg["recent"] == n
            assert seg["residual"] < method.demotion_unit  # the partial page (KIVI: key block)
        step(model, cache, ids[:, t : t + 1])


def test_sequence_shorter_than_the_windows(model):
    cache = OscarCache(model.config, "naive", sink=4, recent=8)
    step(model, cache, ids_of(3))
    assert cache.segments() == {"sink": 3, "quantized": 0, "residual": 0, "recent": 0, "total": 3}
    for _ in range(6):
        step(model, cache, ids_of(1, seed=5))
    assert cache.segments() == {"sink": 4, "quantized": 0, "residual": 0, "recent": 5, "total": 9}
    assert cache.nbytes()["quantized"] == 0


def test_pure_int2_quantizes_every_token(model):
    cache = OscarCache(model.config, "naive", sink=0, recent=0, page=1)
    step(model, cache, ids_of(5))
    assert cache.segments()["quantized"] == 5
    step(model, cache, ids_of(1))
    assert cache.segments() == {"sink": 0, "quantized": 6, "residual": 0, "recent": 0, "total": 6}
    assert cache.nbytes()["sink"] == cache.nbytes()["window"] == 0


def test_kivi_quantizes_whole_blocks_only(model):
    method = make_method("kivi", sink=2, recent=3, group_size=4)
    cache = OscarCache(model.config, method)
    step(model, cache, ids_of(8))  # 8 - 2 - 3 = 3 candidates < one block of 4
    assert cache.segments()["quantized"] == 0 and cache.segments()["residual"] == 3
    step(model, cache, ids_of(1))  # 4 candidates: tokens 2..5 form the first block
    assert cache.segments()["quantized"] == 4 and cache.segments()["residual"] == 0
    for _ in range(3):
        step(model, cache, ids_of(1))
    assert cache.segments()["quantized"] == 4 and cache.segments()["residual"] == 3
    step(model, cache, ids_of(1))
    assert cache.segments()["quantized"] == 8


# ------------------------------------------------------------------ memory
def test_nbytes_and_bits_per_element(model, config):
    cache = OscarCache(config, "naive", sink=4, recent=8, group_size=32)
    step(model, cache, ids_of(100))
    layers, heads, d = config.num_hidden_layers, config.num_key_value_heads, config.head_dim
    per_row = d // 4 + 2 * 2  # INT2 codes + fp16 scale and zero (one group)
    nb = cache.nbytes()
    # page 16 (default): 16 * floor((100 - 4 - 8) / 16) = 80 quantized, the tail holds 100 - 4 - 80 = 16
    assert nb["quantized"] == layers * 2 * heads * 80 * per_row
    assert nb["sink"] == layers * 2 * heads * 4 * d * 4  # float32 model
    assert nb["window"] == layers * 2 * heads * 16 * d * 4
    assert nb["total"] == nb["sink"] + nb["quantized"] + nb["window"]
    assert cache.nbytes(allocated=True)["quantized"] >= nb["quantized"]
    bpe = (80 * 8 * per_row + 20 * 32 * d) / (100 * d)
    assert cache.bits_per_element() == pytest.approx(bpe)
    assert OscarCache(config, "bf16").bits_per_element() == 0.0


def test_row_store_grows_amortised():
    store = RowStore()
    caps = []
    for i in range(100):
        store.append(quantize(torch.randn(1, 2, 1, 32), QuantConfig(2, 32)))
        caps.append(store.capacity)
    assert store.length == 100 and sorted(set(caps)) == [16, 32, 64, 128]
    rows = torch.randn(1, 2, 3, 32)
    store.append(quantize(rows, QuantConfig(2, 32)))
    assert torch.equal(store.view().codes[:, :, -3:], quantize(rows, QuantConfig(2, 32)).codes)


# ------------------------------------------------------------------ generate and Cache API
def test_generate_matches_manual_greedy_loop(model):
    prompt = ids_of(9)
    out = model.generate(prompt, cache=OscarCache(model.config, "naive", sink=2, recent=3),
                         max_new_tokens=12, do_sample=False)
    cache, seq = OscarCache(model.config, "naive", sink=2, recent=3), prompt
    nxt = step(model, cache, prompt)[:, -1].argmax(-1, keepdim=True)
    for _ in range(12):
        seq = torch.cat([seq, nxt], 1)
        nxt = step(model, cache, nxt)[:, -1].argmax(-1, keepdim=True)
    assert torch.equal(out, seq)


def test_generate_accepts_past_key_values(model):
    prompt = ids_of(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        a = model.generate(prompt, past_key_values=OscarCache(model.config, "int4", sink=1, recent=2),
                           max_new_tokens=5, do_sample=False)
    b = model.generate(prompt, cache=OscarCache(model.config, "int4", sink=1, recent=2), max_new_tokens=5, do_sample=False)
    assert torch.equal(a, b)


def test_cache_api_basics(model):
    cache = OscarCache(model.config, "hadamard", sink=2, recent=3)
    assert cache.get_seq_length() == 0 and not cache.is_compileable
    step(model, cache, ids_of(7))
    assert cache.get_seq_length() == 7 and cache.get_mask_sizes(2, 0) == (9, 0)
    first = step(model, cache, ids_of(1, seed=9))
    cache.reset()
    assert cache.get_seq_length() == 0
    step(model, cache, ids_of(7))
    assert torch.equal(step(model, cache, ids_of(1, seed=9)), first)
    with pytest.raises(NotImplementedError, match="cropped"):
        cache.crop(-1)


@pytest.mark.parametrize("name", ["bf16", "naive"])
def test_batch_ops_are_exact(model, name):
    ids = ids_of(12, batch=2)
    a = OscarCache(model.config, name, sink=2, recent=3)
    a.set_padding(None)  # no padding (a batch is refused until the cache knows)
    step(model, a, ids)
    b = OscarCache(model.config, name, sink=2, recent=3)
    b.set_padding(None)
    step(model, b, ids.flip(0))
    b.reorder_cache(torch.tensor([1, 0]))
    nxt = ids_of(1, batch=2, seed=4)
    assert (step(model, a, nxt) - step(model, b, nxt)).abs().max() < 1e-6
    a.batch_repeat_interleave(2)
    a.batch_select_indices(torch.tensor([2]))
    c = OscarCache(model.config, name, sink=2, recent=3)
    step(model, c, ids[1:])
    step(model, c, nxt[1:])
    nxt2 = ids_of(1, seed=8)
    assert (step(model, a, nxt2) - step(model, c, nxt2)).abs().max() < 1e-5


def test_beam_search_runs(model):
    prompt = ids_of(6)
    a = model.generate(prompt, cache=OscarCache(model.config, "bf16"), num_beams=2, max_new_tokens=4, do_sample=False)
    b = model.generate(prompt, cache=DynamicCache(config=model.config), num_beams=2, max_new_tokens=4, do_sample=False)
    assert torch.equal(a, b)
    from oscarkv.integrations.transformers import track_padding

    handle = track_padding(model)  # beams make a batch: the cache needs the (all-ones) mask
    try:
        model.generate(prompt, cache=OscarCache(model.config, "naive", sink=1, recent=2), num_beams=2,
                       max_new_tokens=4, do_sample=False)
    finally:
        handle.remove()


# ------------------------------------------------------------------ left padding
def _left_pad(prompts, pad_id=0):
    n = max(p.shape[1] for p in prompts)
    ids = torch.full((len(prompts), n), pad_id)
    mask = torch.zeros(len(prompts), n, dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, n - p.shape[1]:] = p[0]
        mask[b, n - p.shape[1]:] = 1
    return ids, mask


@pytest.mark.parametrize("name,page", [("naive", 1), ("oscar", 1), ("naive", 4), ("oscar", 3)])
def test_left_padded_batch_matches_each_prompt_alone(model, rotations, name, page):
    # page > 1: each row demotes at its own page boundaries although the batch shares its storage
    kw = dict(sink=3, recent=4, group_size=32, page=page, rotations=rotations if name == "oscar" else None)
    prompts = [ids_of(11, seed=1), ids_of(5, seed=2), ids_of(8, seed=3)]
    ids, mask = _left_pad(prompts)
    gen = dict(max_new_tokens=10, do_sample=False, output_logits=True, return_dict_in_generate=True, pad_token_id=0)
    cache = OscarCache(model.config, name, **kw)
    cache.set_padding(mask)
    batched = model.generate(ids, attention_mask=mask, cache=cache, **gen)
    assert cache.segments()["quantized"] > 0
    for b, p in enumerate(prompts):
        alone = model.generate(p, cache=OscarCache(model.config, name, **kw), **gen)
        assert torch.equal(batched.sequences[b, ids.shape[1]:], alone.sequences[0, p.shape[1]:])
        for lb, la in zip(batched.logits, alone.logits):
            assert (lb[b] - la[0]).abs().max() < 1e-4


def test_padding_errors(model):
    cache = OscarCache(model.config, "naive")
    with pytest.raises(ValueError, match="left padding only"):
        cache.set_padding(torch.tensor([[1, 1, 0]]))
    kivi = OscarCache(model.config, "kivi", group_size=4)
    with pytest.raises(NotImplementedError, match="kivi"):
        kivi.set_padding(torch.tensor([[1, 1, 1], [0, 1, 1]]))
    kivi.set_padding(torch.tensor([[0, 1, 1], [0, 1, 1]]))  # equal padding is fine
    step(model, cache, ids_of(3))
    with pytest.raises(ValueError, match="non-empty"):
        cache.set_padding(torch.tensor([[0, 1, 1]]))
    cache.set_padding(torch.tensor([[1, 1, 1, 1]]))  # same (no) padding: a no-op


# ------------------------------------------------------------------ errors
def test_oscar_needs_rotations(config):
    with pytest.raises(ValueError, match="needs calibrated rotations"):
        OscarCache(config, "oscar")


def test_rotations_of_another_model_are_refused(config, make_config, make_rotations):
    with pytest.raises(RotationMismatchError, match="layers"):
        OscarCache(config, "oscar", rotations=make_rotations(make_config(layers=3)))
    other = make_config()
    other.vocab_size = 123  # same shapes, different model: caught by the config hash
    with pytest.raises(RotationMismatchError, match="config hash"):
        OscarCache(config, "oscar", rotations=make_rotations(other))


def test_unknown_method(config):
    with pytest.raises(ValueError, match="unknown method"):
        OscarCache(config, "int3")


@pytest.mark.parametrize("name,page", [("naive", 1), ("naive", 3), ("kivi", 16), ("bf16", 16)])
def test_held_quantized_rule_matches_the_cache(model, name, page):
    method = make_method(name, sink=2, recent=3, group_size=4, page=page)
    cache = OscarCache(model.config, method)
    step(model, cache, ids_of(4))
    for _ in range(14):
        n = cache.get_seq_length()
        mask = method.held_quantized(torch.arange(n), n)
        q = cache.segments()["quantized"]
        assert int(mask.sum()) == q and (q == 0 or bool(mask[2 : 2 + q].all()))
        step(model, cache, ids_of(1))
