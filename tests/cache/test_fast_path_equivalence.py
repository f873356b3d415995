"""Decoding through OscarCache == one full forward whose attention swaps in fake-quantized K/V
exactly where the documented rule says. This ties the cache to the evaluation fast path."""

import pytest
import torch
from transformers import AttentionInterface, DynamicCache

from oscarkv.cache import OscarCache
from oscarkv.methods import make_method

REF = "oscarkv_test_reference"


def reference_logits(model, ids, method, rotations, chunks):
    """Full forward; query i (in update chunk [a, e)) sees token j fake-quantized iff j < a and
    method.held_quantized(j, e): older tokens as held after the update, same-chunk tokens raw."""
    d = model.config.head_dim
    plans = [method.layer_plan(i, d, rotations) for i in range(model.config.num_hidden_layers)]
    n = ids.shape[1]
    start = torch.zeros(n, dtype=torch.long)
    end = torch.zeros(n, dtype=torch.long)
    for a, e in chunks:
        start[a:e], end[a:e] = a, e
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    use_q = (j < start[:, None]) & method.held_quantized(j, end[:, None])

    def attention(module, q, k, v, mask, scaling, **kw):
        groups = q.shape[1] // k.shape[1]
        kq, vq = plans[module.layer_idx].fake_quant_kv(k, v, method.sink) if method.quantized else (k, v)
        rep = lambda t: t.repeat_interleave(groups, dim=1)
        s = torch.where(use_q, q @ rep(kq).transpose(-1, -2), q @ rep(k).transpose(-1, -2)) * scaling
        p = torch.softmax(s.masked_fill(j > i, float("-inf")), dim=-1)
        out = (p * ~use_q) @ rep(v) + (p * use_q) @ rep(vq)
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(REF, attention)
    model.set_attn_implementation(REF)
    try:
        with torch.no_grad():
            return model(ids).logits
    finally:
        model.set_attn_implementation("sdpa")


def cache_logits(model, ids, cache, chunks):
    with torch.no_grad():
        return torch.cat([model(ids[:, a:e], cache=cache).logits for a, e in chunks], dim=1)


def decode_chunks(prefill, n, extra=()):
    """[0, prefill) then optional multi-token chunks, then one token at a time."""
    out, a = [(0, prefill)], prefill
    for size in extra:
        out.append((a, a + size))
        a += size
    out += [(t, t + 1) for t in range(a, n)]
    return out


@pytest.mark.parametrize(
    "name,sink,recent,group,page",
    [
        ("naive", 3, 5, 8, 1),
        ("naive", 3, 5, 8, 4),  # page-wise demotion: the recent window floats in [5, 8]
        ("hadamard", 3, 5, 32, 1),
        ("int4", 2, 4, 16, 3),
        ("oscar", 3, 5, 32, 1),
        ("oscar", 4, 8, 32, 4),
        ("kivi", 3, 5, 8, 16),  # page is unused by KIVI (its key block is its unit)
        ("naive", 0, 0, 32, 1),  # pure INT2: even the previous token is quantized
        ("kivi", 0, 0, 4, 16),
    ],
)
def test_decode_matches_fake_quant_reference(model, rotations, name, sink, recent, group, page):
    method = make_method(name, sink=sink, recent=recent, group_size=group, page=page)
    rot = rotations if name == "oscar" else None
    ids = torch.randint(1, 100, (1, 36), generator=torch.Generator().manual_seed(1))
    chunks = decode_chunks(10, 36, extra=(6,))  # a multi-token chunk after the prefill too
    got = cache_logits(model, ids, OscarCache(model.config, method, rotations=rot), chunks)
    want = reference_logits(model, ids, method, rot, chunks)
    assert (got - want).abs().max() < 1e-4
    # and quantization matters: the reference without quantization differs clearly
    plain = reference_logits(model, ids, make_method("bf16"), None, chunks)
    assert (want - plain).abs().max() > 1e-3


def test_bf16_equals_full_forward_and_dynamic_cache(model):
    ids = torch.randint(1, 100, (2, 24), generator=torch.Generator().manual_seed(2))
    chunks = decode_chunks(8, 24)
    with torch.no_grad():
        full = model(ids).logits
    dyn = cache_logits(model, ids, DynamicCache(config=model.config), chunks)
    got = cache_logits(model, ids, OscarCache(model.config, "bf16"), chunks)
    assert torch.equal(got, dyn)
    assert (got - full).abs().max() < 1e-5


def test_windows_cover_everything_means_no_quantization(model):
    """While n <= sink + recent nothing is quantized: same logits as bf16."""
    ids = torch.randint(1, 100, (1, 14), generator=torch.Generator().manual_seed(3))
    chunks = decode_chunks(5, 14)
    a = cache_logits(model, ids, OscarCache(model.config, "naive", sink=6, recent=8), chunks)
    b = cache_logits(model, ids, OscarCache(model.config, "bf16"), chunks)
    assert (a - b).abs().max() < 1e-5
