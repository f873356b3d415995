import pytest
import torch

from oscarkv.quant import QuantConfig, dequantize, quantize
from oscarkv.rotation import (
    COMPOSITIONS,
    bit_reversal_permutation,
    bit_reverse_indices,
    hadamard,
    orthogonality_error,
    oscar_rotation,
)


@pytest.mark.parametrize("n", [1, 2, 8, 64, 128, 256])
def test_hadamard_orthogonal_symmetric(n):
    h = hadamard(n)
    assert orthogonality_error(h) < 1e-12
    assert torch.allclose(h, h.T)
    assert torch.allclose(h.abs(), torch.full_like(h, n**-0.5))


@pytest.mark.parametrize("n", [0, 3, 96, 100])
def test_hadamard_rejects_non_power_of_two(n):
    with pytest.raises(ValueError, match="power-of-two"):
        hadamard(n)


def test_bit_reverse():
    assert bit_reverse_indices(128)[:8].tolist() == [0, 64, 32, 96, 16, 80, 48, 112]
    br = bit_reverse_indices(64)
    assert sorted(br.tolist()) == list(range(64))
    assert torch.equal(br[br], torch.arange(64))  # an involution


def test_bit_reversal_permutation_places_ranks():
    lam = torch.arange(8.0)  # ascending: rank0 = index 7
    perm = bit_reversal_permutation(lam)
    assert perm[0] == 7 and perm[4] == 6 and perm[2] == 5 and perm[6] == 4
    assert sorted(perm.tolist()) == list(range(8))


def _random_cov(d, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(4 * d, d, generator=g, dtype=torch.float64) * torch.logspace(0, 2, d, dtype=torch.float64)
    return a.T @ a / (4 * d)


@pytest.mark.parametrize("comp", COMPOSITIONS)
@pytest.mark.parametrize("d", [64, 128])
def test_all_compositions_orthogonal(comp, d):
    r, lam = oscar_rotation(_random_cov(d), comp)
    assert r.shape == (d, d)
    assert orthogonality_error(r) < 1e-10
    assert torch.all(lam[1:] >= lam[:-1])


def test_oscar_equalizes_importance_diagonal():
    # after U.H the diagonal of R^T C R is flat (= tr(C)/d): every coordinate equally important
    c = _random_cov(64, 1)
    r, _ = oscar_rotation(c, "u_h_pbr")
    diag = torch.diagonal(r.T @ c @ r)
    assert torch.allclose(diag, torch.full_like(diag, torch.trace(c).item() / 64), rtol=1e-8)


def test_rotation_preserves_dot_products():
    torch.manual_seed(0)
    r, _ = oscar_rotation(_random_cov(64), "u_h_pbr")
    q, k = torch.randn(5, 64, dtype=torch.float64), torch.randn(9, 64, dtype=torch.float64)
    assert torch.allclose((q @ r) @ (k @ r).T, q @ k.T, atol=1e-10)


def test_hadamard_spreads_outlier_for_int2():
    torch.manual_seed(0)
    x = torch.randn(512, 128)
    x[:, 3] *= 25
    h = hadamard(128, torch.float32)
    cfg = QuantConfig(scale_dtype="float32")
    plain = (dequantize(quantize(x, cfg)) - x).pow(2).mean()
    rot = (dequantize(quantize(x @ h, cfg)) @ h.T - x).pow(2).mean()
    assert rot < plain / 2


@pytest.mark.parametrize("comp", ["u", "u_h", "u_h_pbr"])
def test_recover_eigenvectors_inverts_compose(comp):
    from oscarkv.rotation import compose, eigh_sorted, recover_eigenvectors

    g = torch.Generator().manual_seed(3)
    a = torch.randn(400, 16, generator=g, dtype=torch.float64) * torch.linspace(0.2, 4, 16, dtype=torch.float64)
    lam, u = eigh_sorted(a.T @ a / 400)
    r = compose(u, lam, comp)
    assert (recover_eigenvectors(r, lam, comp) - u).abs().max() < 1e-12
    assert recover_eigenvectors(r, lam, "h") is None
