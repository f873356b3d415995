"""The one per-head rotation rule (rotation/apply.py): layouts, GQA sharing, o_proj folding."""

import pytest
import torch

from oscarkv.errors import InputError
from oscarkv.rotation import expand_heads, fold_v_rotation_into_o_proj, rotate, rotate_with_keys, unrotate


def _orth(n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(n, d, d, generator=g, dtype=torch.float64))[0].float()


@pytest.mark.parametrize("n_rot", [1, 2, 6])
def test_per_head_rule_and_layouts(n_rot):
    hq, d = 6, 8
    r = _orth(n_rot, d)
    x = torch.randn(2, hq, 5, d)  # [B, H, T, d]
    want = torch.stack([x[:, h] @ r[h // (hq // n_rot)] for h in range(hq)], dim=1)
    torch.testing.assert_close(rotate(x, r), want)
    # [B, T, H, d] with head_axis=-2 is the same rule
    torch.testing.assert_close(rotate(x.transpose(1, 2), r, head_axis=-2), want.transpose(1, 2))
    torch.testing.assert_close(unrotate(rotate(x, r), r), x, atol=1e-5, rtol=1e-5)
    assert rotate(x.bfloat16(), r).dtype == torch.bfloat16 and rotate(x, None) is x


def test_refuses_rotations_that_do_not_divide_heads():
    with pytest.raises(ValueError, match="not a divisor"):
        rotate(torch.randn(1, 6, 2, 8), _orth(4, 8))


@pytest.mark.parametrize("n_rot", [1, 2])
def test_fold_into_o_proj(n_rot):
    hq, d, hidden = 4, 8, 12
    r = _orth(n_rot, d, seed=1)
    w = torch.randn(hidden, hq * d)
    o_rot = torch.randn(3, hq, d)  # attention output in the rotated V basis
    ref = unrotate(o_rot, r, head_axis=-2).reshape(3, -1) @ w.T
    got = o_rot.reshape(3, -1) @ fold_v_rotation_into_o_proj(w, r, hq).T
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("b,hq,hkv,t,shared", [(1, 8, 2, 1, False), (3, 4, 4, 2, False), (2, 6, 1, 1, False),
                                               (2, 8, 4, 1, True), (1, 4, 2, 3, True)])
def test_rotate_with_keys_equals_rotating_each(b, hq, hkv, t, shared):
    g = torch.Generator().manual_seed(b * 100 + hq * 10 + hkv)
    d = 16
    r = torch.linalg.qr(torch.randn(1 if shared else hkv, d, d, generator=g, dtype=torch.float64))[0].float()
    q = torch.randn(b, hq, t, d, generator=g)
    k = torch.randn(b, hkv, t, d, generator=g)
    rq, rk = rotate_with_keys(q, k, r)
    assert rq.shape == q.shape and rk.shape == k.shape
    torch.testing.assert_close(rq, rotate(q, expand_heads(r, hq)))
    torch.testing.assert_close(rk, rotate(k, r))
    hq16, hk16 = rotate_with_keys(q.bfloat16(), k.bfloat16(), r)  # float32 math, the rows' dtype back
    assert hq16.dtype == torch.bfloat16 and hk16.dtype == torch.bfloat16
    torch.testing.assert_close(hq16, rotate(q.bfloat16(), expand_heads(r, hq)))


def test_rotate_with_keys_refuses_mismatched_heads():
    with pytest.raises(InputError, match="do not match"):
        rotate_with_keys(torch.zeros(1, 6, 1, 8), torch.zeros(1, 4, 1, 8), torch.eye(8)[None])
    with pytest.raises(InputError, match="rotations for 2 KV heads"):
        rotate_with_keys(torch.zeros(1, 4, 1, 8), torch.zeros(1, 2, 1, 8), torch.eye(8).expand(3, 8, 8))
