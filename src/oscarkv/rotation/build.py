"""Orthogonal rotations for KV quantization: Hadamard, bit-reversal permutation, OSCAR's R = U.H.P.

Convention (spec section 1): rows are row vectors and "rotate x" means ``x @ R``. Because every R here
is orthogonal, ``(q @ R) @ (k @ R).T == q @ k.T`` and ``(p @ (v @ R)) @ R.T == p @ v``.
"""

from __future__ import annotations

import torch
from ..errors import InputError

# Compositions offered for ablations; "u_h_pbr" is the shipped OSCAR recipe (spec section 1.3).
COMPOSITIONS = ("u_h_pbr", "u_h", "u", "h", "h_pbr", "identity")


def _check_pow2(n: int, what: str = "size") -> int:
    if n <= 0 or n & (n - 1):
        raise InputError(
            f"Hadamard rotations need a power-of-two {what}, got {n}; "
            "OSCAR rotations need a power-of-two head_dim (e.g. 32, 64, 128, 256)"
        )
    return n.bit_length() - 1


def hadamard(n: int, dtype=torch.float64) -> torch.Tensor:
    """Normalized Sylvester Hadamard matrix H_n (symmetric, orthogonal, H @ H = I)."""
    _check_pow2(n)
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / n**0.5).to(dtype)


def bit_reverse_indices(n: int) -> torch.Tensor:
    """br(i): i with its log2(n)-bit binary expansion reversed (n=128: 0, 64, 32, 96, 16, ...)."""
    nbits = _check_pow2(n)
    out = []
    for i in range(n):
        r = 0
        for b in range(nbits):
            r |= ((i >> b) & 1) << (nbits - 1 - b)
        out.append(r)
    return torch.tensor(out, dtype=torch.long)


def bit_reversal_permutation(eigenvalues: torch.Tensor) -> torch.Tensor:
    """Column order ``perm`` with perm[br(i)] = sigma(i), sigma = eigenvalue order, largest first.

    Consecutive ranks land far apart (rank 0 -> column 0, rank 1 -> column d/2, rank 2 -> d/4, ...),
    so with group_size < d the high-variance directions are spread over different quant groups.
    Apply it as ``M[:, perm]`` (equivalently ``M @ P`` with ``P = I[:, perm]``).
    """
    n = eigenvalues.shape[-1]
    sigma = torch.argsort(eigenvalues, descending=True, stable=True)
    perm = torch.empty(n, dtype=torch.long)
    perm[bit_reverse_indices(n)] = sigma
    return perm


def permutation_matrix(perm: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    return torch.eye(perm.numel(), dtype=dtype)[:, perm]


def eigh_sorted(cov: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (ascending, as eigh returns them) and eigenvectors (columns) of a symmetric matrix."""
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise InputError(f"covariance must be a square matrix, got shape {tuple(cov.shape)}")
    c = cov.double()
    c = (c + c.T) / 2
    if not torch.isfinite(c).all():
        raise InputError("covariance has NaN/inf entries; check the calibration data and model dtype")
    lam, u = torch.linalg.eigh(c)
    return lam, u


def oscar_rotation(cov: torch.Tensor, composition: str = "u_h_pbr") -> tuple[torch.Tensor, torch.Tensor]:
    """Rotation R (float64, [d, d]) and eigenvalues (ascending) for one attention-aware covariance.

    u_h_pbr: R = U . H . P_br  (OSCAR; spec section 1.3: P permutes the columns of U.H by the rank of
             the eigenvalues, bit-reversed). At group_size == head_dim P is a no-op for min/max
             quantization, it only matters for smaller groups.
    u_h, u, h, h_pbr, identity: the ablation rows.
    """
    if composition not in COMPOSITIONS:
        raise InputError(f"unknown composition {composition!r}; choose one of {COMPOSITIONS}")
    lam, u = eigh_sorted(cov)
    return compose(u, lam, composition), lam


def compose(u: torch.Tensor, eigenvalues: torch.Tensor, composition: str) -> torch.Tensor:
    """R of ``composition`` from the eigenvectors U (columns, eigh order) and their eigenvalues."""
    d = u.shape[-1]
    if composition == "identity":
        return torch.eye(d, dtype=u.dtype)
    if composition == "u":
        return u
    h = hadamard(d, u.dtype)
    if composition == "h":
        return h
    perm = bit_reversal_permutation(eigenvalues)
    if composition == "h_pbr":
        return h[:, perm]
    if composition == "u_h":
        return u @ h
    if composition == "u_h_pbr":
        return (u @ h)[:, perm].contiguous()
    raise InputError(f"unknown composition {composition!r}; choose one of {COMPOSITIONS}")


def recover_eigenvectors(r: torch.Tensor, eigenvalues: torch.Tensor, composition: str) -> torch.Tensor | None:
    """The inverse of ``compose``: U from a stored R (u: U = R; u_h: U = R H; u_h_pbr: U = R P_br^T H,
    H being its own inverse). None where R does not contain U (h, h_pbr, identity, imported files).
    P_br is rebuilt from ``eigenvalues``: that is the calibration's P only when they are strictly
    ascending as stored (ties could reorder), so callers that need exactness check that first."""
    d = r.shape[-1]
    if composition == "u":
        return r
    if composition == "u_h":
        return r @ hadamard(d, r.dtype)
    if composition == "u_h_pbr":
        perm = bit_reversal_permutation(eigenvalues)  # R = (U H)[:, perm]
        return r[:, torch.argsort(perm)] @ hadamard(d, r.dtype)
    return None


def orthogonality_error(r: torch.Tensor) -> float:
    """max |R R^T - I| (0 for an exact rotation)."""
    r = r.double()
    return (r @ r.T - torch.eye(r.shape[0], dtype=torch.float64)).abs().max().item()


def key_rescale(cq: torch.Tensor, key_second_moment: torch.Tensor, max_ratio: float = 1e4) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact per-direction key rescale (issue 10, not in the paper): S = U diag(s) U^T and S^-1 with U the
    eigenvectors of the query covariance C_Q (eigenvalues lambda_i) and s_i = (lambda_i / kappa_i)^(1/4),
    kappa_i = u_i^T E[k k^T] u_i the keys' second moment along u_i; geometric mean of s is 1.

    Keys are stored as k S R and queries use q S^-1 R, so (q S^-1 R).(k S R) = q.k exactly. For an
    error that is spread evenly over the coordinates (what H does), the logit error sum_i lambda_i e_i^2
    / s_i^2 times the row range ~ sum_i kappa_i s_i^2 is minimised by this s (Cauchy-Schwarz): directions
    that queries look along get more of the INT2 range. ``max_ratio`` bounds lambda/kappa around its
    geometric mean (so s stays within a factor max_ratio^(1/4)).
    """
    lam, u = eigh_sorted(cq)
    kappa = torch.einsum("di,de,ei->i", u, key_second_moment.double(), u)
    eps = 1e-12 * float(lam.abs().max().clamp_min(1e-30))
    ratio = lam.clamp_min(eps) / kappa.clamp_min(1e-12 * float(kappa.abs().max().clamp_min(1e-30)))
    logr = ratio.log()
    logr = logr - logr.mean()
    b = torch.log(torch.tensor(max_ratio, dtype=torch.float64))
    s = (logr.clamp(-b, b) / 4).exp()
    return (u * s) @ u.T, (u / s) @ u.T
