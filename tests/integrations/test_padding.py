"""Issue 11 item 2: left padding is found from the attention mask, or the batch is refused; never a
silently different answer for a padded row."""

import pytest
import torch

from oscarkv.cache import OscarCache
from oscarkv.errors import StateError
from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention, track_padding
from tinymodels import left_pad


def _prompts():
    g = torch.Generator().manual_seed(11)
    return [torch.randint(1, 100, (1, n), generator=g) for n in (37, 20, 29)]


GEN = dict(max_new_tokens=24, do_sample=False, pad_token_id=0)


def test_padded_batch_without_a_mask_source_is_refused(model, config):
    ids, mask = left_pad(_prompts())
    with pytest.raises(StateError, match="track_padding"):
        model.generate(ids, attention_mask=mask, cache=OscarCache(config, "naive", sink=4, recent=16), **GEN)


@pytest.mark.parametrize("path", ["default", "oscar_attention"])
@pytest.mark.parametrize("name", ["naive", "oscar"])
def test_padded_rows_generate_like_each_row_alone(model, config, rotations, path, name):
    """Default page (16), windows small enough that every row demotes pages during generation."""
    kw = dict(sink=4, recent=16, rotations=rotations if name == "oscar" else None)
    prompts = _prompts()
    ids, mask = left_pad(prompts)
    cache = OscarCache(config, name, **kw)
    handle = track_padding(model) if path == "default" else None
    if path == "oscar_attention":
        enable_oscar_attention(model, cache)
    try:
        batched = model.generate(ids, attention_mask=mask, cache=cache, **GEN)
        assert torch.equal(cache.layers[0].pad, (mask == 0).sum(1))
        assert cache.segments()["quantized"] > 0
        for b, p in enumerate(prompts):
            alone_cache = OscarCache(config, name, **kw)
            if path == "oscar_attention":
                enable_oscar_attention(model, alone_cache)
            alone = model.generate(p, cache=alone_cache, **GEN)
            assert torch.equal(batched[b, ids.shape[1]:], alone[0, p.shape[1]:]), f"row {b}"
    finally:
        if handle is not None:
            handle.remove()
        disable_oscar_attention(model)


def test_padded_rows_with_the_int8_query_reference_generate_like_each_row_alone(model, config, rotations):
    """"oscar+q8" on the reference backend: each row's quantized slots (scored with the int8 query) start after its
    own padding and sink, so a padded row generates what it generates alone."""
    kw = dict(sink=4, recent=16, rotations=rotations, backend="reference")
    prompts = _prompts()
    ids, mask = left_pad(prompts)
    cache = OscarCache(config, "oscar+q8", **kw)
    enable_oscar_attention(model, cache)
    try:
        batched = model.generate(ids, attention_mask=mask, cache=cache, **GEN)
        assert cache.segments()["quantized"] > 0
        for b, p in enumerate(prompts):
            alone_cache = OscarCache(config, "oscar+q8", **kw)
            enable_oscar_attention(model, alone_cache)
            alone = model.generate(p, cache=alone_cache, **GEN)
            assert torch.equal(batched[b, ids.shape[1]:], alone[0, p.shape[1]:]), f"row {b}"
    finally:
        disable_oscar_attention(model)


def test_unpadded_batch_through_the_hook(model, config):
    ids = torch.randint(1, 100, (2, 30), generator=torch.Generator().manual_seed(3))
    handle = track_padding(model)
    try:
        cache = OscarCache(config, "naive", sink=4, recent=16)
        with torch.no_grad():
            model(ids, cache=cache)  # no mask: no padding
        assert torch.equal(cache.layers[0].pad, torch.zeros(2, dtype=torch.long))
    finally:
        handle.remove()
