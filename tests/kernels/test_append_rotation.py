"""write_kv(..., rotation=, q=, q_out=): R_K fused into the append (issue 8). On CPU the torch and Triton
backends rotate first (rotation.rotate_with_keys), then write: equal to rotating by hand and writing; the CUDA
kernel's own rotation is checked against them in tests/kernels/test_cuda_kernels.py."""

import pytest
import torch

from conftest import requires_triton
from helpers import build

from oscarkv.errors import InputError
from oscarkv.kernels import write_kv
from oscarkv.kernels.paged import POOL_TENSORS as POOL
from oscarkv.rotation import rotate, rotate_with_keys


def _orth(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(n, d, d, generator=g, dtype=torch.float64))[0].float().contiguous()


@pytest.mark.parametrize("backend,layout", [("torch", "logical"), ("torch", "tile16"),
                                            pytest.param("triton", "logical", marks=requires_triton)])
@pytest.mark.parametrize("shared", [True, False])
def test_fused_rotation_equals_rotating_first(backend, layout, shared):
    lens, hkv, d, group = [5, 40, 90], 2, 64, 3
    kw = dict(d=d, hkv=hkv, bs=16, sink=16, recent=32, layout=layout, seed=4)
    ca, pa, ids, _ = build(lens, backend=backend, **kw)
    cb, pb, _, _ = build(lens, backend=backend, **kw)
    r = _orth(1 if shared else hkv, d, 5)
    g = torch.Generator().manual_seed(6)
    for n in (20, 1, 1, 17, 1):  # a chunk that demotes pages made of new rows, then single-row steps
        k = torch.randn(n * len(lens), hkv, d, generator=g).bfloat16()
        v = torch.randn(n * len(lens), hkv, d, generator=g).bfloat16()
        q = torch.randn(n * len(lens), hkv * group, d, generator=g).bfloat16()
        qo = torch.empty_like(q)
        write_kv(pa, k, v, ca.plan_append(ids, [n] * len(lens)), backend=backend, rotation=r, q=q, q_out=qo)
        qr, kr = rotate_with_keys(q.unsqueeze(2), k.unsqueeze(2), r)
        write_kv(pb, kr.squeeze(2), v, cb.plan_append(ids, [n] * len(lens)), backend=backend)
        assert torch.equal(qo, qr.squeeze(2))
        for f in POOL:
            assert torch.equal(getattr(pa, f), getattr(pb, f)), f
    # without q: only k is rotated
    k = torch.randn(len(lens), hkv, d, generator=g).bfloat16()
    v = torch.randn(len(lens), hkv, d, generator=g).bfloat16()
    write_kv(pa, k, v, ca.plan_append(ids, [1] * len(lens)), backend=backend, rotation=r)
    write_kv(pb, rotate(k.unsqueeze(2), r).squeeze(2), v, cb.plan_append(ids, [1] * len(lens)), backend=backend)
    for f in POOL:
        assert torch.equal(getattr(pa, f), getattr(pb, f)), f


def test_fused_rotation_refuses_bad_arguments_before_writing():
    cache, pool, ids, _ = build([20], d=64, hkv=2, bs=16, sink=16, recent=32)
    before = pool.k_hp.clone()
    k = v = torch.zeros(1, 2, 64, dtype=torch.bfloat16)
    q, qo = torch.zeros(1, 4, 64, dtype=torch.bfloat16), torch.empty(1, 4, 64, dtype=torch.bfloat16)
    plan = cache.plan_append(ids, [1])
    r = _orth(2, 64, 1)
    with pytest.raises(InputError, match="rotation must be a contiguous float32"):
        write_kv(pool, k, v, plan, rotation=r.double(), q=q, q_out=qo)
    with pytest.raises(InputError, match="rotation must be"):
        write_kv(pool, k, v, plan, rotation=_orth(3, 64, 1))
    with pytest.raises(InputError, match="give q and q_out together"):
        write_kv(pool, k, v, plan, rotation=r, q=q)
    with pytest.raises(InputError, match="q must be"):
        write_kv(pool, k, v, plan, rotation=r, q=torch.zeros(1, 3, 64, dtype=torch.bfloat16), q_out=qo)
    with pytest.raises(InputError, match="q_out must be"):
        write_kv(pool, k, v, plan, rotation=r, q=q, q_out=qo.float())
    assert torch.equal(pool.k_hp, before)
