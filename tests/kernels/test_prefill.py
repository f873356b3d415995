"""Chunked prefill over the paged cache against an independent dense reference."""

import torch

from helpers import rel_err

from oscarkv.kernels import MixedKVCache, MixedKVPool, decode_attention, prefill_attention, write_kv
from oscarkv.kernels.reference import attend
from oscarkv.quant import QuantConfig, fake_quantize

S, W, BS, D, HKV, G = 8, 16, 4, 64, 2, 4


def _expected_past(rows, t, cfg):
    """Rows of positions [0, t) as the cache holds them: windows exact, history fake-quantized."""
    x = rows[:t].double().clone()
    hist = slice(S, S + BS * (max(0, t - S - W) // BS))  # page-wise rule, page = block_size
    x[hist] = fake_quantize(rows[hist].float(), cfg).double()
    return x


def test_chunked_prefill_matches_dense_reference(device):
    g = torch.Generator().manual_seed(0)
    kc, vc = QuantConfig(clip_ratio=0.96), QuantConfig(clip_ratio=0.92)
    pool = MixedKVPool.allocate(64, 64, BS, HKV, D, kc, vc, device=device)
    cache = MixedKVCache(64, 64, BS, sink=S, recent=W)
    lens = [55, 70]
    chunk_plan = [[7, 13], [13, 1], [5, 30], [30, 26]]
    rows = [(torch.randn(n, HKV, D, generator=g).bfloat16().to(device),
             torch.randn(n, HKV, D, generator=g).bfloat16().to(device)) for n in lens]
    qs = [torch.randn(n, HKV * G, D, generator=g).bfloat16().to(device) for n in lens]
    for i in range(2):
        cache.add(i)
    done = [0, 0]
    for take in chunk_plan:
        meta = cache.metadata([0, 1], device=device)
        sl = [slice(done[i], done[i] + take[i]) for i in range(2)]
        q = torch.cat([qs[i][sl[i]] for i in range(2)])
        k = torch.cat([rows[i][0][sl[i]] for i in range(2)])
        v = torch.cat([rows[i][1][sl[i]] for i in range(2)])
        out = prefill_attention(q, k, v, [0, take[0], take[0] + take[1]], pool, meta)
        for i in range(2):
            t0, c = done[i], take[i]
            kk = torch.cat([_expected_past(rows[i][0], t0, kc), rows[i][0][t0 : t0 + c].double()])
            vv = torch.cat([_expected_past(rows[i][1], t0, vc), rows[i][1][t0 : t0 + c].double()])
            mask = torch.ones(c, t0 + c, dtype=torch.bool, device=device)
            mask[:, t0:] = torch.ones(c, c, dtype=torch.bool, device=device).tril()
            ref = attend(qs[i][sl[i]].double(), kk, vv, D**-0.5, mask)
            o = out[sum(take[:i]) : sum(take[: i + 1])]
            assert rel_err(o, ref) < 6e-3
        write_kv(pool, k, v, cache.plan_append([0, 1], take))
        done = [a + b for a, b in zip(done, take)]


def test_one_token_prefill_equals_decode_after_append(device):
    """A 1-token chunk sees [past | itself]; decode after appending it sees the same keys.

    The past is S + W - 1 tokens so the append demotes nothing (a page is demoted when t reaches
    S + W + B, and the two would then differ by exactly that page's quantization).
    """
    g = torch.Generator().manual_seed(1)
    pool = MixedKVPool.allocate(64, 64, BS, HKV, D, QuantConfig(clip_ratio=0.96), QuantConfig(), device=device)
    cache = MixedKVCache(64, 64, BS, sink=S, recent=W)
    cache.add(0)
    k = torch.randn(S + W, HKV, D, generator=g).bfloat16().to(device)
    v = torch.randn(S + W, HKV, D, generator=g).bfloat16().to(device)
    write_kv(pool, k[:-1], v[:-1], cache.plan_append([0], [S + W - 1]))
    q = torch.randn(1, HKV * G, D, generator=g).to(device)
    pre = prefill_attention(q, k[-1:], v[-1:], [0, 1], pool, cache.metadata([0], device=device))
    write_kv(pool, k[-1:], v[-1:], cache.plan_append([0], [1]))
    dec = decode_attention(q, pool, cache.metadata([0], device=device), backend="torch")
    assert rel_err(pre, dec) < 1e-5
