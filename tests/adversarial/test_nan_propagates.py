"""Issue 11 item 3: a NaN key in the BF16 window must not come out of decode as exactly 0."""

from pathlib import Path

import pytest
import torch

from oscarkv.kernels import MixedKVCache, MixedKVPool, decode_attention, write_kv
from oscarkv.kernels.reference import attend
from oscarkv.quant import QuantConfig


def _pool_with(k, v, sink=16, recent=32, bs=16, backend="torch", device="cpu"):
    # block size 16 and head_dim 64: Triton on a GPU needs dot operands of at least 16 along K (tokens; head_dim / 4)
    pool = MixedKVPool.allocate(16, 16, bs, k.shape[1], k.shape[2], QuantConfig(group_size=k.shape[2]),
                                QuantConfig(group_size=k.shape[2]), device=device)
    cache = MixedKVCache(16, 16, bs, sink=sink, recent=recent)
    cache.add("a")
    write_kv(pool, k.bfloat16().to(device), v.bfloat16().to(device), cache.plan_append(["a"], [k.shape[0]]),
             backend=backend)
    return pool, cache.metadata(["a"], device=device)


# (backend, device): Triton runs on CPU under TRITON_INTERPRET=1 and on a GPU for real (the lead's device run)
BACKENDS = [("torch", "cpu")] + ([("triton", "cpu")] if __import__("os").environ.get("TRITON_INTERPRET") == "1" else []) \
    + ([("triton", "cuda")] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_nan_key_in_window_propagates(backend, device):
    torch.manual_seed(0)
    k, v = torch.randn(40, 2, 64), torch.randn(40, 2, 64)
    k[37, 1, 3] = float("nan")  # KV head 1, a token of the recent window (held in bf16)
    pool, meta = _pool_with(k, v, device=device)
    q = torch.randn(1, 4, 64, device=device)
    out = decode_attention(q, pool, meta, backend=backend).cpu()
    assert torch.isfinite(out[0, :2]).all()  # query heads of KV head 0 are untouched
    assert torch.isnan(out[0, 2:]).all()  # heads that read the NaN key: NaN, not a plausible 0
    assert not (out[0, 2:] == 0).any()


def test_nan_query_propagates():
    k, v = torch.randn(6, 2, 32), torch.randn(6, 2, 32)
    pool, meta = _pool_with(k, v)
    q = torch.randn(1, 4, 32)
    q[0, 0, 0] = float("nan")
    out = decode_attention(q, pool, meta, backend="torch")
    assert torch.isnan(out[0, 0]).all() and torch.isfinite(out[0, 1:]).all()


def test_fully_masked_row_is_zero_explicitly():
    q, k, v = torch.randn(3, 2, 16), torch.randn(5, 2, 16), torch.randn(5, 2, 16)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    out = attend(q, k, v, 0.25, mask)
    assert (out[1] == 0).all() and torch.isfinite(out).all()
    k[2, 0, 0] = float("nan")
    out = attend(q, k, v, 0.25, mask)
    assert (out[1] == 0).all() and not torch.isfinite(out[0]).all()  #: not hidden either


def test_no_nan_to_num_left_in_attention_paths():
    """The pattern that hid the NaN must not come back anywhere in the package's attention code."""
    src = Path(__import__("oscarkv").__file__).parent
    hits = [str(p.relative_to(src)) for p in src.rglob("*.py") if "nan_to_num" in p.read_text()]
    assert hits == [], hits


@pytest.mark.parametrize("backend, device", BACKENDS)
def test_nan_key_reaching_int2_raises_or_propagates(backend, device):
    torch.manual_seed(0)
    k, v = torch.randn(96, 2, 64), torch.randn(96, 2, 64)
    k[20, 1, 3] = float("nan")  # position 20: INT2 history (sink 16, recent 32, page 16: tokens [16, 64))
    try:
        pool, meta = _pool_with(k, v, backend=backend, device=device)
    except ValueError as e:  # the torch reference refuses to quantize it
        assert "NaN" in str(e)
        return
    out = decode_attention(torch.randn(1, 4, 64, device=device), pool, meta, backend=backend).cpu()
    assert torch.isfinite(out[0, :2]).all() and torch.isnan(out[0, 2:]).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the CUDA append/decode kernels)")
def test_nan_key_cuda_kernels_propagate():
    """The CUDA append kernel's min/max/clip drop NaN: it must store a NaN scale, not plausible codes."""
    from oscarkv.kernels import cuda_ops

    torch.manual_seed(0)
    d, hkv, hq, n = 64, 2, 8, 96  # sink 16, recent 32, page 16: tokens [16, 64) go to INT2
    pool = MixedKVPool.allocate(64, 64, 16, hkv, d, QuantConfig(group_size=d), QuantConfig(group_size=d),
                                device="cuda", layout="tile16")
    cache = MixedKVCache(64, 64, 16, sink=16, recent=32)
    cache.add("a")
    k, v = torch.randn(n, hkv, d), torch.randn(n, hkv, d)
    k[20, 1, 3] = float("nan")  # an INT2 token of KV head 1
    q = torch.randn(1, hq, d, device="cuda", dtype=torch.bfloat16)
    why = cuda_ops.unsupported_reason(q, pool)
    if why:
        pytest.skip(f"CUDA kernels unavailable here: {why}")
    write_kv(pool, k.bfloat16().cuda(), v.bfloat16().cuda(), cache.plan_append(["a"], [n]), backend="cuda")
    out = decode_attention(q, pool, cache.metadata(["a"], device="cuda"), backend="cuda").float().cpu()
    assert torch.isfinite(out[0, : hq // 2]).all()
    assert torch.isnan(out[0, hq // 2 :]).all()
