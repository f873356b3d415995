import pytest
import torch
from transformers import DynamicCache

from oscarkv.cache import OscarCache


@pytest.mark.slow
def test_bf16_cache_generates_like_dynamic_cache_on_the_real_model():
    from oscarkv.models import load_model

    lm = load_model("default")
    model, tok = lm.model, lm.tokenizer
    ids = tok("The Python reference manual describes", return_tensors="pt").input_ids
    kw = dict(max_new_tokens=16, do_sample=False)
    with torch.no_grad():
        want = model.generate(ids, cache=DynamicCache(config=model.config), **kw)
        got = model.generate(ids, cache=OscarCache(model.config, "bf16"), **kw)
        # and an INT2 cache with windows larger than the sequence is still exact
        windowed = model.generate(ids, cache=OscarCache(model.config, "naive", sink=64, recent=256), **kw)
    assert torch.equal(got, want)
    assert torch.equal(windowed, want)
