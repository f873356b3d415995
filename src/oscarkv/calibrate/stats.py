"""Streaming float64 statistics for one layer (spec section 1.2), memory independent of token count.

Shapes: q ``[B, H_q, T, d]``, k and v ``[B, H_kv, T, d]``. GQA grouping is contiguous: query head j
belongs to KV head j // g with g = H_q / H_kv.

    C_Q^(h) = sum over tokens and the g group queries of q^T q, divided by n * g
    Sigma_K = mean_h C_Q^(h)                                   (qqt target)
    w_{h,t} = k_{h,t} C_Q^(h) k_{h,t}^T                         (needs the final C_Q: second pass)
    Sigma_V = mean_h  sum_t w_{h,t} v^T v / max(sum_t w_{h,t}, 1e-12)   (sst target)

The last line is the spec's (1/n) sum_t wbar v^T v with wbar = n w / sum w, rearranged so that it
can be accumulated as two running sums.
"""

from __future__ import annotations

import torch
from ..errors import InputError


def _grouped(q: torch.Tensor, n_kv: int) -> torch.Tensor:
    b, hq, t, d = q.shape
    return q.reshape(b, n_kv, hq // n_kv, t, d)  # contiguous grouping: j -> j // g


class RowMean:
    """Running per-KV-head mean of rows ``[B, H, T, d]`` (post-RoPE keys or values), float64."""

    def __init__(self, n_kv: int, d: int, device=None):
        self.sum = torch.zeros(n_kv, d, dtype=torch.float64, device=device)
        self.count = 0

    def update(self, x: torch.Tensor) -> None:
        self.sum += x.double().sum(dim=(0, 2))
        self.count += x.shape[0] * x.shape[2]

    def mean(self) -> torch.Tensor:
        if self.count == 0:
            raise InputError("no rows were accumulated")
        return self.sum / self.count


class QueryCovariance:
    """Running sum of q^T q per KV head (pass 1)."""

    def __init__(self, n_kv: int, d: int, device=None):
        self.n_kv = n_kv
        self.sum = torch.zeros(n_kv, d, d, dtype=torch.float64, device=device)
        self.count = 0  # query vectors per KV head (n * g)
        self.wsum = None  # sum of the query weights per KV head, when ``update`` got weights

    def update(self, q: torch.Tensor, weight: torch.Tensor | None = None) -> None:
        """q ``[B, H_q, T, d]``; optional per-query weight ``[B, H_q, T]`` (then ``per_head`` is the weighted
        mean of q^T q, e.g. ``attention_mass`` weights)."""
        qg = _grouped(q.double(), self.n_kv).transpose(0, 1)  # [H_kv, B, g, T, d]
        rows = qg.reshape(self.n_kv, -1, qg.shape[-1])
        if weight is None:
            self.sum += rows.transpose(1, 2) @ rows
            self.count += rows.shape[1]
            return
        w = _grouped(weight.double()[..., None], self.n_kv).transpose(0, 1).reshape(self.n_kv, -1, 1)
        self.sum += (rows * w).transpose(1, 2) @ rows
        ws = w.sum(dim=(1, 2))  # [H_kv]
        self.wsum = ws if self.wsum is None else self.wsum + ws
        self.count += rows.shape[1]

    def per_head(self) -> torch.Tensor:
        """C_Q^(h), ``[H_kv, d, d]``."""
        if self.count == 0:
            raise InputError("no queries were accumulated")
        c = self.sum / (self.count if self.wsum is None else self.wsum.clamp_min(1e-300)[:, None, None])
        return (c + c.transpose(-1, -2)) / 2


def attention_mass(q: torch.Tensor, k: torch.Tensor, held, scaling: float | None = None) -> torch.Tensor:
    """Per query ``[B, H_q, T]``: a_i = sum over the keys j that the cache holds quantized when query i
    runs (``held(j, i)``, bool ``[T, T]``) of p_ij (1 - p_ij), p = the causal attention probabilities.

    Why: a logit error delta_j perturbs query i's attention distribution by KL ~ 1/2 sum_j p_ij (1 - p_ij)
    delta_ij^2 (to second order, independent errors), so the logit error that matters is the one of
    queries that look at quantized keys; a query that puts its mass on the BF16 sink or recent window
    is insensitive to key error. Weighting q^T q by a_i gives the attention-weighted C_Q."""
    b, hq, t, d = q.shape
    g = hq // k.shape[1]
    scaling = d**-0.5 if scaling is None else scaling
    pos = torch.arange(t, device=q.device)
    mask = held.to(q.device)
    causal = pos[None, :] <= pos[:, None]
    out = torch.empty(b, hq, t, dtype=torch.float64, device=q.device)
    for h in range(hq):  # one head at a time: [B, T, T] scores
        s = (q[:, h].float() @ k[:, h // g].float().transpose(-1, -2)) * scaling
        p = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
        out[:, h] = (p * (1 - p) * mask).sum(-1).double()
    return out


def score_weights(k: torch.Tensor, cq: torch.Tensor) -> torch.Tensor:
    """w_{b,h,t} = k C_Q^(h) k^T (mean squared logit of the head's queries against this key)."""
    kd = k.double()
    return ((kd @ cq.to(kd.device)[None]) * kd).sum(-1)


class ValueCovariance:
    """Running sums of w v^T v and w per KV head (pass 2)."""

    def __init__(self, cq: torch.Tensor):
        self.cq = cq
        h, d, _ = cq.shape
        self.sum = torch.zeros(h, d, d, dtype=torch.float64, device=cq.device)
        self.wvsum = torch.zeros(h, d, dtype=torch.float64, device=cq.device)  # sum w v (for centering)
        self.wsum = torch.zeros(h, dtype=torch.float64, device=cq.device)
        self.count = 0  # tokens per KV head

    def update(self, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        w = score_weights(k, self.cq)
        vd = v.double().transpose(0, 1).reshape(v.shape[1], -1, v.shape[-1])  # [H, B*T, d]
        wv = vd * w.transpose(0, 1).reshape(v.shape[1], -1, 1)
        self.sum += wv.transpose(1, 2) @ vd
        self.wvsum += wv.sum(1)
        self.wsum += w.sum(dim=(0, 2))
        self.count += w.shape[0] * w.shape[2]
        return w

    def per_head(self, mean: torch.Tensor | None = None) -> torch.Tensor:
        """Score-weighted value covariance per KV head, ``[H_kv, d, d]``; with ``mean`` ``[H, d]`` that of
        the centered values v - mean (sum w (v-m)(v-m)^T expanded from the running sums)."""
        w = self.wsum.clamp_min(1e-12)[:, None, None]
        c = self.sum / w
        if mean is not None:
            m = mean.double().to(c.device)
            wv = self.wvsum / w[..., 0]
            c = c - m[:, :, None] * wv[:, None, :] - wv[:, :, None] * m[:, None, :] + (self.wsum / w[:, 0, 0])[:, None, None] * m[:, :, None] * m[:, None, :]
        return (c + c.transpose(-1, -2)) / 2

    def mean_weight(self) -> torch.Tensor:
        """Per-head mean of w over all tokens seen (to normalise sampled weights to mean 1)."""
        return self.wsum / max(self.count, 1)


class TokenReservoir:
    """Uniform sample of at most ``cap`` tokens (k, v, w of all KV heads of a token kept together).

    Each token gets a random key; we keep the ``cap`` smallest keys seen so far, which is a uniform
    sample without replacement whatever the stream length. Memory: cap * H_kv * (2d + 1) floats.
    """

    def __init__(self, cap: int, generator: torch.Generator):
        self.cap = cap
        self.gen = generator
        self.keys = torch.empty(0)
        self.k = self.v = self.w = None

    def update(self, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor) -> None:
        b, h, t, d = k.shape
        rows_k = k.float().cpu().permute(0, 2, 1, 3).reshape(b * t, h, d)
        rows_v = v.float().cpu().permute(0, 2, 1, 3).reshape(b * t, h, d)
        rows_w = w.cpu().permute(0, 2, 1).reshape(b * t, h)
        keys = torch.rand(b * t, generator=self.gen, dtype=torch.float64)
        if self.k is not None:
            keys = torch.cat([self.keys, keys])
            rows_k, rows_v, rows_w = (torch.cat([a, r]) for a, r in ((self.k, rows_k), (self.v, rows_v), (self.w, rows_w)))
        if keys.numel() > self.cap:
            keep = torch.topk(keys, self.cap, largest=False).indices
            keys, rows_k, rows_v, rows_w = keys[keep], rows_k[keep], rows_v[keep], rows_w[keep]
        self.keys, self.k, self.v, self.w = keys, rows_k, rows_v, rows_w
