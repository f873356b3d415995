"""One-pass evaluation of a KV method: a single forward whose attention sees exactly what real
decoding through the quantized cache would see.

Why this is exact: every method here quantizes token-locally (a token's INT2 codes depend on that
token alone; KIVI keys on their own block of ``group_size`` tokens). So when the query at position i
runs during decoding, the cache holds n = i + 1 tokens and token j is quantized iff

    method.held_quantized(j, n)   (the window rule with demotion page B, ``KVMethod.int2_len``)
    and j < i                     (the query's own token comes in the same cache update, unquantized)

and its quantized value is the same whenever it is read. A forward over the whole sequence in which
query i uses the dequantized K/V of key j exactly when that rule says reproduces step-by-step
decoding (tests/eval/test_banded_vs_cache.py checks this against ``OscarCache``), at the cost of one
prefill instead of thousands of decode steps (8 tok/s decode on this CPU).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..dims import attention_dims
from ..methods import KVMethod
from ..rotation import RotationSet, rotate, unrotate
from ..errors import InputError

ATTN_NAME = "oscarkv_banded"


def quantized_mask(method: KVMethod, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """[Tq, Tk] bool: does query at position q_pos[a] read key k_pos[b] quantized?"""
    if not method.quantized:
        return torch.zeros(q_pos.numel(), k_pos.numel(), dtype=torch.bool)
    # the query's own token arrives in the same cache update and is returned unquantized
    # (matters only for recent == 0 with page == 1)
    own = k_pos[None, :] < q_pos[:, None]
    return method.held_quantized(k_pos[None, :], q_pos[:, None] + 1) & own


def int8_query_features(plan, query, key, kq, scaling):
    """Method "+q8": the quantized keys are scored with the CUDA decode kernel's int8 query (per head, in the key
    basis: ``kernels.reference.int8_query``), the full-precision keys with q, in the same one SDPA call, by
    widening head_dim d to 2d + 1: full-precision keys [k, 0, 0] meet [q, ., .] (q . k); quantized keys
    [0, k^, 1] meet [., q8, (q - q8) . mu] (q8 . k^ + (q - q8) . mu = q8 . (k^ - mu) + q . mu). That is the
    kernel's q_rot8 . k^_stored (stored keys are (k - mu) M and q8 = q_rot8 M^T) plus q . mu, the per-query
    constant every score carries in the model basis (rotation/centering.py). Values keep d."""
    from ..kernels.reference import int8_query

    q8 = unrotate(int8_query(rotate(query, plan.k_query_rot), scaling).to(query.dtype), plan.k_rot)
    corr = query.new_zeros(*query.shape[:-1], 1)
    if plan.k_mean is not None:
        mu = plan.k_mean.to(query.device, query.dtype)
        mu = mu.repeat_interleave(query.shape[1] // mu.shape[0], 0) if mu.shape[0] > 1 else mu
        corr = ((query - q8) * mu[None, :, None, :]).sum(-1, keepdim=True)
    zk, z1 = torch.zeros_like(key), key.new_zeros(*key.shape[:-1], 1)
    return (torch.cat([query, q8, corr], -1), torch.cat([key, zk, z1], -1),
            torch.cat([torch.zeros_like(kq), kq, z1 + 1], -1))


class BandedAttention:
    """A transformers attention function (registered under ``ATTN_NAME``) for one method."""

    def __init__(self, method: KVMethod, rotations: RotationSet | None, head_dim: int, num_layers: int, q_chunk: int = 512):
        self.method = method
        self.plans = [method.layer_plan(i, head_dim, rotations) for i in range(num_layers)]
        self.q_chunk = q_chunk

    def __call__(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        b, hq, t, d = query.shape
        hkv = key.shape[1]
        g = hq // hkv
        scaling = d**-0.5 if scaling is None else scaling
        if attention_mask is not None and attention_mask.shape[-1] != key.shape[2]:
            raise InputError("banded evaluation expects one full forward without a cache (no past tokens)")
        plan = self.plans[module.layer_idx]
        if plan.k_cfg is None:  # unquantized: plain causal attention
            out = F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scaling, enable_gqa=g > 1)
            return out.transpose(1, 2).contiguous(), None
        kq, vq = plan.fake_quant_kv(key, value, self.method.sink)
        if self.method.query == "int8":
            query, key, kq = int8_query_features(plan, query, key, kq, scaling)
        # One fused SDPA call per query chunk over [full-precision keys | quantized keys]: a boolean
        # mask lets query i see exactly one copy of each key j (the quantized copy iff the rule says
        # so), which is the mixed attention without materializing scores. The quantized copy starts
        # at ``sink`` because earlier keys are never quantized.
        s0 = min(self.method.sink, t)
        pos = torch.arange(t, device=query.device)
        outs = []
        for a in range(0, t, self.q_chunk):
            b_ = min(a + self.q_chunk, t)
            qp = pos[a:b_]
            kp = pos[:b_]
            qm = quantized_mask(self.method, qp, kp).to(query.device)  # [tq, b_]
            causal = kp[None, :] <= qp[:, None]
            mask = torch.cat([causal & ~qm, (causal & qm)[:, s0:]], dim=1)
            kk = torch.cat([key[:, :, :b_], kq[:, :, s0:b_]], dim=2)
            vv = torch.cat([value[:, :, :b_], vq[:, :, s0:b_]], dim=2)
            outs.append(F.scaled_dot_product_attention(query[:, :, a:b_], kk, vv, attn_mask=mask,
                                                       scale=scaling, enable_gqa=g > 1))
        out = torch.cat(outs, dim=2)
        return out.transpose(1, 2).contiguous(), None


@torch.no_grad()
def banded_logits(model, input_ids: torch.Tensor, method: KVMethod, rotations: RotationSet | None = None, q_chunk: int = 512) -> torch.Tensor:
    """Logits [B, T, V] of one forward that attends like decoding through ``method``'s cache."""
    from transformers import AttentionInterface

    dims = attention_dims(model)
    if rotations is not None and method.rotation == "calibrated":
        rotations.check_model(model.config)
    fn = BandedAttention(method, rotations, dims.head_dim, dims.num_layers, q_chunk)
    AttentionInterface.register(ATTN_NAME, fn)
    prev = model.config._attn_implementation
    model.set_attn_implementation(ATTN_NAME)
    try:
        return model(input_ids, use_cache=False).logits
    finally:
        model.set_attn_implementation(prev)
