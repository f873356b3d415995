import torch

from oscarkv.calibrate import calibrate, capture_qkv, make_batches
from oscarkv.calibrate.stats import QueryCovariance, TokenReservoir, ValueCovariance, score_weights
from oscarkv.rotation import eigh_sorted


def _direct(qs, ks, vs, n_kv):
    """Spec section 1.2 written out with explicit loops over heads (non-streaming)."""
    q = torch.cat([x.permute(1, 0, 2, 3).reshape(x.shape[1], -1, x.shape[-1]) for x in qs], 1).double()  # [Hq, N, d]
    k = torch.cat([x.permute(1, 0, 2, 3).reshape(x.shape[1], -1, x.shape[-1]) for x in ks], 1).double()
    v = torch.cat([x.permute(1, 0, 2, 3).reshape(x.shape[1], -1, x.shape[-1]) for x in vs], 1).double()
    g = q.shape[0] // n_kv
    cq, sv = [], []
    for h in range(n_kv):
        qh = torch.cat([q[j] for j in range(q.shape[0]) if j // g == h])  # [n*g, d]
        c = qh.T @ qh / qh.shape[0]
        w = torch.stack([k[h, t] @ c @ k[h, t] for t in range(k.shape[1])])
        n = w.numel()
        wbar = n * w / w.sum().clamp_min(1e-12)
        sv.append(sum(wbar[t] * torch.outer(v[h, t], v[h, t]) for t in range(n)) / n)
        cq.append(c)
    return torch.stack(cq), torch.stack(sv)


def _rand_batches(n_batches=3, hq=6, hkv=2, d=8):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(2, hq, t, d, generator=g), torch.randn(2, hkv, t, d, generator=g),
             torch.randn(2, hkv, t, d, generator=g)) for t in (5, 7, 3)[:n_batches]]


def test_streaming_equals_direct():
    batches = _rand_batches()
    qc = QueryCovariance(2, 8)
    for q, _, _ in batches:
        qc.update(q)
    vc = ValueCovariance(qc.per_head())
    for _, k, v in batches:
        vc.update(k, v)
    cq_ref, sv_ref = _direct(*zip(*batches), n_kv=2)
    torch.testing.assert_close(qc.per_head(), cq_ref)
    torch.testing.assert_close(vc.per_head(), sv_ref)
    assert qc.count == (10 + 14 + 6) * 3


def test_gqa_grouping_is_contiguous():
    q = torch.zeros(1, 6, 4, 8)
    q[:, 3:5] = 1.0  # query heads 3, 4 -> KV head 1 (g = 3): 3 // 3 = 1, 4 // 3 = 1
    qc = QueryCovariance(2, 8)
    qc.update(q)
    cq = qc.per_head()
    assert cq[0].abs().max() == 0
    torch.testing.assert_close(cq[1], torch.full((8, 8), 2 / 3, dtype=torch.float64))


def test_score_weight_formula():
    k = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    a = torch.randn(2, 8, 8, dtype=torch.float64)
    cq = a @ a.transpose(1, 2)
    w = score_weights(k, cq)
    assert torch.allclose(w[0, 1, 3], k[0, 1, 3] @ cq[1] @ k[0, 1, 3])


def test_reservoir_bounded_and_rows_consistent():
    res = TokenReservoir(10, torch.Generator().manual_seed(0))
    for i in range(5):
        k = torch.arange(i * 6, i * 6 + 6, dtype=torch.float32).view(1, 1, 6, 1).expand(1, 2, 6, 4)
        res.update(k, k + 0.5, k[..., 0].double() * 2)
    assert res.k.shape == (10, 2, 4) and res.w.shape == (10, 2)
    torch.testing.assert_close(res.v, res.k + 0.5)
    torch.testing.assert_close(res.w, res.k[..., 0].double() * 2)
    assert len(set(res.k[:, 0, 0].tolist())) == 10  # without replacement


def test_calibrate_matches_direct_on_captured(tiny, ids):
    m = tiny()
    batches = make_batches(ids, 64, 2)
    caps = [capture_qkv(m, b) for b in batches]
    rs = calibrate(m, ids, seq_len=64, batch_size=2, group_size=32, fit_clip=False, progress=False)
    for layer in range(2):
        cq, sv = _direct(*zip(*[c[layer] for c in caps]), n_kv=2)
        torch.testing.assert_close(rs.k_eigenvalues[layer, 0], eigh_sorted(cq.mean(0))[0].float(), rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(rs.v_eigenvalues[layer, 0], eigh_sorted(sv.mean(0))[0].float(), rtol=1e-4, atol=1e-6)
    assert rs.meta["calib_tokens"] == 320
