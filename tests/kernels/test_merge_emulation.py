"""CPU emulation of the CUDA decode kernel's poll merge (``cuda/int2_paged.cu``, CudaDecodeConfig.poll_merge).

The merging CTA folds the splits' partial outputs o_s (each normalized within its split) and log2-sum-exps lse_s
in the order they arrive, in batches of up to KP slots: m' = max(m, lse of the batch), the running den and acc
rescaled by 2^(m - m'), then den += 2^(lse - m'), acc += 2^(lse - m') o. This replays that rule in float32 for
random arrival orders and batch splits and checks it against the merge written directly (float64 softmax over the
splits' lse), with empty splits (lse -inf, o 0) and issue 11's NaN rule (a NaN lse makes the head NaN)."""

import random

import torch

KP = 8  # the .cu's partial loads in flight per batch


def fold(o, lse, batches):
    """The merger's fold of slots o [S, n] / lse [S] arriving in ``batches`` (lists of slot indices)."""
    mx, den, acc, nan = float("-inf"), torch.tensor(0.0), torch.zeros(o.shape[1]), False
    for batch in batches:
        for j0 in range(0, len(batch), KP):
            part = batch[j0:j0 + KP]
            ls = lse[part]
            nan |= bool(ls.isnan().any())
            m2 = max([mx] + [x for x in ls.tolist() if x == x])
            if m2 == float("-inf"):
                continue
            c = torch.exp2(torch.tensor(mx - m2))
            den, acc = den * c, acc * c
            e = torch.exp2(ls - m2)
            den = den + e.sum()
            acc = acc + (e[:, None] * o[part]).sum(0)
            mx = m2
    if nan:
        return torch.full_like(acc, float("nan"))
    return acc / den if den > 0 else torch.zeros_like(acc)


def direct(o, lse):
    w = torch.softmax(lse.double() * torch.log(torch.tensor(2.0, dtype=torch.float64)), 0)
    return (w[:, None] * o.double()).sum(0).float()


def random_batches(n, rnd):
    order = list(range(n))
    rnd.shuffle(order)
    cuts = sorted(rnd.sample(range(1, n), min(n - 1, rnd.randint(0, 5)))) if n > 1 else []
    return [order[a:b] for a, b in zip([0] + cuts, cuts + [n])]


def test_poll_merge_fold_equals_the_direct_merge_in_any_arrival_order():
    rnd = random.Random(0)
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        n = rnd.randint(1, 64)
        o = torch.randn(n, 16, generator=g)
        lse = torch.randn(n, generator=g) * 20
        empty = [s for s in range(n) if rnd.random() < 0.2]
        lse[empty], o[empty] = float("-inf"), 0.0
        got = fold(o, lse, random_batches(n, rnd))
        if len(empty) == n:
            assert torch.equal(got, torch.zeros(16))
        else:
            assert torch.allclose(got, direct(o, lse), rtol=1e-5, atol=1e-6)


def test_poll_merge_fold_keeps_a_nan_lse():
    o, lse = torch.randn(5, 4), torch.tensor([1.0, float("nan"), float("-inf"), 3.0, 2.0])
    assert fold(o, lse, [[3, 0], [1, 2, 4]]).isnan().all()
    assert fold(o, torch.tensor([float("-inf")] * 2 + [float("nan")] + [float("-inf")] * 2), [[0, 1, 2, 3, 4]]).isnan().all()
