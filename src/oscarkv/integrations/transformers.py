"""The OSCAR attention path for transformers models (spec section 5.1).

With ``enable_oscar_attention(model, cache)`` the cache returns K/V in the rotated basis
(k @ R_K, v @ R_V) and the model runs the registered attention function ``"oscar_sdpa"``:

    q_rot = q @ R_K                     (q_rot . k_rot^T == q . k^T, R_K orthogonal)
    o_rot = sdpa(q_rot, k_rot, v_rot)   (= o @ R_V)
    o     = o_rot @ R_V^T               (skipped when R_V^T is absorbed into o_proj)

Absorption (``absorb_v_into_o_proj=True``): o_proj maps concat_h(o_h) through W_o; with
o_h = o_rot_h R_V^T the column block of head h becomes W_o[:, h] @ R_V. The spec's code keeps the
explicit rotation; absorbing it is the optimisation the spec marks as possible (section 5.1). Where the
values are stored centered (rotation/centering.py), absorption also folds W_o mu_V into o_proj's bias
(``value_mean_bias``), so that no step adds mu_V to the attention output (one elementwise kernel per layer
and step less on the GPU).

The attention function finds its rotations through an ``_oscar_attention`` attribute that
``enable`` sets on every attention module (keyed by ``module.layer_idx``), and it refuses to run
when the K/V did not just come from the enabled cache in rotated mode (another cache, or
``use_cache=False``), since attending rotated q to unrotated K would be silently wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, sdpa_mask

from ..cache import OscarCache
from ..cache.paged import PagedLayer
from ..rotation import fold_v_rotation_into_o_proj, rotate, unrotate
from ..rotation.centering import add_value_mean, rotated_mean, value_mean_bias
from ..dims import attention_dims
from ..errors import InputError, StateError

ATTENTION_NAME = "oscar_sdpa"
# The paged backend's name: no mask builder is registered for it, so transformers passes no mask (the
# kernels know each row's length), which also keeps a decode step's shapes fixed for CUDA graphs.
PAGED_ATTENTION_NAME = "oscar_paged"


@dataclass
class _LayerState:
    cache: OscarCache
    layer_idx: int
    absorbed: bool
    mean_in_bias: bool = False  # mu_V's share of the output folded into o_proj's bias (value_mean_bias)


def _layer_rotations(cache: OscarCache, idx: int):
    layer = cache.layers[idx]
    plan = getattr(layer, "plan", None)
    # queries use the key transform's inverse transpose (== R_K when it is orthogonal, see methods.LayerPlan)
    return (None, None) if plan is None else (plan.k_query_rot, plan.v_rot)


def _layer_value_mean(cache: OscarCache, idx: int):
    """mu_V in the rotated basis when the layer stores centered values (rotation/centering.py)."""
    plan = getattr(cache.layers[idx], "plan", None)
    return None if plan is None else rotated_mean(plan.v_mean, plan.v_rot)


def oscar_sdpa_attention(module, query, key, value, attention_mask, **kwargs):
    """SDPA in the rotated basis; ``key``/``value`` come rotated from an ``OscarCache``."""
    st: _LayerState | None = getattr(module, "_oscar_attention", None)
    if st is None:
        raise StateError(
            f"attention implementation {ATTENTION_NAME!r} is set but this module was not prepared; "
            "use oscarkv.integrations.transformers.enable_oscar_attention(model, cache)"
        )
    layer = st.cache.layers[st.layer_idx]
    if isinstance(layer, PagedLayer) and layer.state.opaque:  # compiled step: key/value are this step's rows
        return layer.attend(query, kwargs.get("scaling"), unrotate_v=not st.absorbed, key=key, value=value,
                            add_mean=not st.mean_in_bias), None
    if not layer.fresh:
        raise StateError(
            "OSCAR attention is enabled with one OscarCache, but this forward's keys/values did not come from it; "
            "pass that cache (cache=... / past_key_values=...) with use_cache=True, or call disable_oscar_attention(model)"
        )
    layer.fresh = False
    rk, rv = _layer_rotations(st.cache, st.layer_idx)
    if isinstance(layer, PagedLayer):  # kernels over the paged pools; q and o are (un)rotated inside
        return layer.attend(query, kwargs.get("scaling"), unrotate_v=not st.absorbed, add_mean=not st.mean_in_bias), None
    query = rotate(query, rk)  # [B, H_q, T, d]; each query head uses its KV head's R_K
    q8 = getattr(layer, "q8_mask", None)
    if q8 is not None:  # "+q8": the quantized history scored with the CUDA kernel's int8 query
        out, weights = _int8_query_attention(query, key, value, attention_mask, q8, kwargs.get("scaling")), None
    else:
        out, weights = sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    # centered values: + mu_V (rotated) before rotating back / the absorbed o_proj (exact, p sums to 1), unless
    # o_proj's bias holds it
    if not st.mean_in_bias:
        out = add_value_mean(out, _layer_value_mean(st.cache, st.layer_idx), heads_dim=2)
    if rv is not None and not st.absorbed:
        out = unrotate(out, rv, head_axis=-2).contiguous()  # out is [B, T, H_q, d]: o = o_rot @ R_V^T
    return out, weights


def _int8_query_attention(query, key, value, attention_mask, quantized, scaling):
    """Softmax attention in fp32 where the keys of the ``quantized`` slots ``[B, S]`` are scored with
    ``kernels.reference.int8_query(q)`` and the others with q, as the CUDA decode kernel scores its INT2 history
    and its BF16 windows (the reference backend's "+q8"; ``kernels.reference.attend`` per row). query
    ``[B, Hq, T, d]`` (rotated), key / value ``[B, Hkv, S, d]``, attention_mask: transformers' SDPA mask ``[B, 1,
    T, S]`` (bool, keep = True, or additive: 0 = keep) or None (causal, the T queries being the last T positions).
    Returns ``[B, T, Hq, d]`` in query's dtype."""
    from ..kernels.reference import attend, int8_query

    b, hq, t, d = query.shape
    s_len = key.shape[2]
    scaling = d**-0.5 if scaling is None else scaling
    q8 = int8_query(query, scaling)
    if attention_mask is None:
        pos = torch.arange(s_len, device=query.device)
        keep = (pos[None, :] <= pos[s_len - t:, None])[None].expand(b, t, s_len)
    else:
        m = attention_mask[:, 0, :, :s_len]
        keep = (m if m.dtype == torch.bool else m >= 0).expand(b, t, s_len)
    rows = [attend(query[i].float().transpose(0, 1), key[i].float().transpose(0, 1), value[i].float().transpose(0, 1),
                   scaling, mask=keep[i], q_alt=q8[i].transpose(0, 1), alt=quantized[i]) for i in range(b)]
    return torch.stack(rows).to(query.dtype)


def register() -> None:
    """Register the attention function and its mask builder (idempotent)."""
    AttentionInterface.register(ATTENTION_NAME, oscar_sdpa_attention)
    AttentionInterface.register(PAGED_ATTENTION_NAME, oscar_sdpa_attention)
    # the mask for a custom name is None unless one is registered: reuse SDPA's
    if ATTENTION_NAME not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
        AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)


def _attention_modules(model):
    return [m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "o_proj") and hasattr(m, "head_dim")]


# ------------------------------------------------------------------ padding
def _padding_hook(module, args, kwargs):
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    if not isinstance(cache, OscarCache) or cache.get_seq_length() != 0:
        return
    mask = kwargs.get("attention_mask")
    if mask is None and len(args) > 1 and torch.is_tensor(args[1]):
        mask = args[1]  # model(input_ids, attention_mask, ...) positionally
    if mask is None or (torch.is_tensor(mask) and mask.ndim == 2):
        cache.set_padding(mask)  # None: the model attends to every token, so there is no padding


def track_padding(model):
    """Forward pre-hook that hands the 2-D attention mask of the first (prefill) forward of an empty
    ``OscarCache`` to ``cache.set_padding`` (no mask: no padding); works with ``generate`` and direct
    calls. ``enable_oscar_attention`` installs it. Without it (or ``set_padding``) an ``OscarCache``
    refuses a batch of more than one row, since it cannot tell padded rows apart.
    Returns the hook handle (``handle.remove()``)."""
    return model.register_forward_pre_hook(_padding_hook, with_kwargs=True)


# ------------------------------------------------------------------ enable / disable
def enable_oscar_attention(model, cache: OscarCache, absorb_v_into_o_proj: bool = False) -> None:
    """Run ``model`` on rotated K/V from ``cache`` through the ``"oscar_sdpa"`` attention function.

    Also installs ``track_padding``. Undo with ``disable_oscar_attention(model)``.
    """
    if not isinstance(cache, OscarCache):
        raise TypeError(f"enable_oscar_attention needs an OscarCache, got {type(cache).__name__}")
    # shapes first, before anything changes (the attention implementation, o_proj / v_proj folds)
    mods = _attention_modules(model)
    if len(mods) != len(cache.layers):
        raise InputError(f"model has {len(mods)} attention layers, the cache {len(cache.layers)}; build the cache from model.config")
    dims = attention_dims(model)
    for what, got, want in (("head_dim", dims.head_dim, cache.head_dim), ("KV heads", dims.num_kv_heads, cache.num_kv_heads)):
        if got != want:
            raise InputError(f"the model has {what} {got}, the cache {want}; build the cache from this model's config")
    if getattr(model, "_oscar_enabled", None) is not None:
        disable_oscar_attention(model)
    # the device of the model decides the backend ("auto"): the paged kernels on CUDA when they run the method
    if cache.paged is None and cache.backend == "auto" and cache.get_seq_length() == 0:
        device = next(model.parameters()).device
        if device.type == "cuda" and cache.paged_unsupported() is None:
            cache.use_paged()
    register()
    saved = {"attn": model.config._attn_implementation, "o_proj": {}, "o_bias": {}}
    model.set_attn_implementation(PAGED_ATTENTION_NAME if cache.paged is not None else ATTENTION_NAME)
    saved["v_proj"] = {}
    for m in mods:
        rv = _layer_rotations(cache, m.layer_idx)[1]
        absorbed = absorb_v_into_o_proj and rv is not None
        if absorbed:
            w = m.o_proj.weight  # [hidden, H_q * d]
            saved["o_proj"][m.layer_idx] = w.detach().clone()
            with torch.no_grad():
                w.copy_(fold_v_rotation_into_o_proj(w.detach(), rv, w.shape[1] // m.head_dim))
            layer = cache.layers[m.layer_idx]
            if isinstance(layer, PagedLayer) and _fold_v_rotation_into_v_proj(m, rv, saved["v_proj"]):
                layer.v_folded = True  # values leave v_proj rotated: one GEMV less per layer and step
        in_bias = absorbed and _fold_value_mean_into_o_proj(m, _layer_value_mean(cache, m.layer_idx), saved["o_bias"])
        m._oscar_attention = _LayerState(cache, m.layer_idx, absorbed, in_bias)
    saved["hook"] = track_padding(model)
    saved["cache"] = cache
    model._oscar_enabled = saved
    cache.set_output_basis("rotated")


def enabled_cache(model) -> OscarCache | None:
    """The cache ``enable_oscar_attention(model, cache)`` enabled ``model`` with (None when not enabled)."""
    saved = getattr(model, "_oscar_enabled", None)
    return None if saved is None else saved.get("cache")


def _fold_value_mean_into_o_proj(module, vm: torch.Tensor | None, saved: dict) -> bool:
    """o_proj's bias += W_o' mu_V R_V (``value_mean_bias``; W_o' the absorbed weight, so the term is in the
    rotated basis the attention output arrives in); a bias is added where o_proj has none. The bias before
    (or None) goes to ``saved``. False (nothing changed) without a value mean."""
    if vm is None:
        return False
    o = module.o_proj
    add = value_mean_bias(o.weight.detach(), vm)
    saved[module.layer_idx] = None if o.bias is None else o.bias.detach().clone()
    with torch.no_grad():
        if o.bias is None:
            o.bias = torch.nn.Parameter(add.to(o.weight.dtype), requires_grad=False)
        else:
            o.bias.copy_((o.bias.float() + add).to(o.bias.dtype))
    return True


def _fold_v_rotation_into_v_proj(module, rv: torch.Tensor, saved: dict) -> bool:
    """v_proj's rows of KV head h become R_V^T W_v[h] (bias b_h R_V), so that v_proj returns v R_V per head
    (the paged backend, with R_V^T absorbed into o_proj: the rotation then costs nothing per step). Only a
    plain linear v_proj (nn.Linear or a fused sibling); False when there is none."""
    v = getattr(module, "v_proj", None)
    w = getattr(v, "weight", None)
    if w is None or w.ndim != 2 or w.shape[0] % module.head_dim:
        return False
    d = module.head_dim
    hkv, hidden = w.shape[0] // d, w.shape[1]
    saved[module.layer_idx] = (w.detach().clone(), None if v.bias is None else v.bias.detach().clone())
    with torch.no_grad():
        # per head: W_h^T [hidden, d] @ R_V -> rows of x, as rotate() takes them ([H, T, d] with T = hidden)
        wt = w.detach().float().view(hkv, d, hidden).transpose(1, 2)
        w.copy_(rotate(wt, rv).transpose(1, 2).reshape(hkv * d, hidden).to(w.dtype))
        if v.bias is not None:
            v.bias.copy_(rotate(v.bias.detach().float().view(hkv, 1, d), rv).reshape(-1).to(v.bias.dtype))
    return True


def disable_oscar_attention(model, cache: OscarCache | None = None) -> None:
    """Restore the attention implementation and o_proj weights; put ``cache`` (or the enabled one)
    back to the original output basis."""
    saved = getattr(model, "_oscar_enabled", None)
    if saved is None:
        return
    enabled_cache = None
    for m in _attention_modules(model):
        st = getattr(m, "_oscar_attention", None)
        if st is not None:
            enabled_cache = st.cache
            del m._oscar_attention
        if m.layer_idx in saved["o_proj"]:
            with torch.no_grad():
                m.o_proj.weight.copy_(saved["o_proj"][m.layer_idx])
        if m.layer_idx in saved.get("o_bias", {}):
            b = saved["o_bias"][m.layer_idx]
            if b is None:
                m.o_proj.bias = None  # the bias enable_oscar_attention added
            else:
                with torch.no_grad():
                    m.o_proj.bias.copy_(b)
        if m.layer_idx in saved.get("v_proj", {}):
            w, b = saved["v_proj"][m.layer_idx]
            with torch.no_grad():
                m.v_proj.weight.copy_(w)
                if b is not None:
                    m.v_proj.bias.copy_(b)
            if enabled_cache is not None and isinstance(enabled_cache.layers[m.layer_idx], PagedLayer):
                enabled_cache.layers[m.layer_idx].v_folded = False
    saved["hook"].remove()
    model.set_attn_implementation(saved["attn"])
    model._oscar_enabled = None
    for c in (cache, enabled_cache):
        if c is not None:
            c.set_output_basis("original")


# ------------------------------------------------------------------ fused sibling projections
class _SiblingGroup:
    """The input and fused output of the last call of a group of sibling projections."""

    __slots__ = ("x", "y", "applied")

    def __init__(self):
        self.x = self.y = None
        self.applied = None  # (fn, fused weight, fused bias) of the conversion under way (``_apply``)


class FusedSiblingLinear(torch.nn.Module):
    """One of several ``nn.Linear`` siblings that read the same input (q/k/v_proj, gate/up_proj), run as
    one GEMM over their concatenated weights: the first sibling of a call computes ``x @ W_all^T`` and
    returns its slice; the others return theirs from the same output when they get the same input tensor
    (else they compute their own slice). Batch-1 decode reads every weight once per step, and one large
    GEMM reaches more of the memory bandwidth than three small ones (BENCHMARKS.md, compiled decode
    step). ``torch.compile`` traces the sharing (one ``mm`` per group). ``weight`` / ``bias`` stay as
    views into the fused tensors (state_dict keys unchanged)."""

    def __init__(self, fused_w, fused_b, lo: int, hi: int, group: _SiblingGroup, first: bool, last: bool):
        super().__init__()
        self.lo, self.hi, self.group, self.first, self.last = lo, hi, group, first, last
        self._set_fused(fused_w, fused_b)
        self.in_features, self.out_features = fused_w.shape[1], hi - lo

    def _set_fused(self, fused_w, fused_b) -> None:
        self.fused_weight, self.fused_bias = fused_w, fused_b
        self.weight = torch.nn.Parameter(fused_w[self.lo:self.hi], requires_grad=False)
        self.bias = None if fused_b is None else torch.nn.Parameter(fused_b[self.lo:self.hi], requires_grad=False)

    def _apply(self, fn, recurse=True):
        """``model.to(...)`` / ``.half()`` / ``.cuda()`` after fusing: convert the fused tensors once per group
        (the siblings get the same ``fn`` in turn) and take the views again. Before, only the views were
        converted while the GEMM kept reading the old fused weight (a dtype or device mismatch from inside
        ``F.linear``, and later in-place changes of a view no longer reached the GEMM)."""
        g = self.group
        if g.applied is None or g.applied[0] is not fn:
            fb = self.fused_bias
            g.applied = (fn, fn(self.fused_weight), None if fb is None else fn(fb))
        self._set_fused(g.applied[1], g.applied[2])
        if self.last:
            g.applied = None
        return self

    def forward(self, x):
        g = self.group
        if self.first:
            g.x, g.y = x, torch.nn.functional.linear(x, self.fused_weight, self.fused_bias)
        elif g.x is not x:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        y = g.y[..., self.lo:self.hi]
        if self.last:  # do not keep the activations alive between forwards
            g.x = g.y = None
        return y


_SIBLINGS = (("self_attn", ("q_proj", "k_proj", "v_proj")), ("mlp", ("gate_proj", "up_proj")))


def fuse_projections(model) -> int:
    """Replace each decoder layer's q/k/v_proj (and gate/up_proj) by ``FusedSiblingLinear`` over one
    concatenated weight. Outputs equal the separate projections up to GEMM rounding. Call it before
    ``enable_oscar_attention`` (``model.to(...)`` afterwards converts each group's fused weight once,
    ``FusedSiblingLinear._apply``); undo with ``unfuse_projections``. Returns the number of groups fused.
    Modules without plain ``nn.Linear`` siblings (or with some biases but not all) are left as they are."""
    n = 0
    for layer in model.modules():
        for parent_name, names in _SIBLINGS:
            parent = getattr(layer, parent_name, None)
            if parent is None or not all(type(getattr(parent, k, None)) is torch.nn.Linear for k in names):
                continue
            lins = [getattr(parent, k) for k in names]
            has_b = [lin.bias is not None for lin in lins]
            if any(has_b) and not all(has_b):
                continue
            with torch.no_grad():
                w = torch.cat([lin.weight for lin in lins], 0)
                b = torch.cat([lin.bias for lin in lins], 0) if all(has_b) else None
            group, lo = _SiblingGroup(), 0
            for i, (k, lin) in enumerate(zip(names, lins)):
                hi = lo + lin.out_features
                setattr(parent, k, FusedSiblingLinear(w, b, lo, hi, group, i == 0, i == len(names) - 1))
                lo = hi
            n += 1
    return n


def unfuse_projections(model) -> int:
    """Back to plain ``nn.Linear`` modules (own contiguous weights). Returns the number of modules restored."""
    n = 0
    for parent in list(model.modules()):
        for k, mod in list(parent.named_children()):
            if isinstance(mod, FusedSiblingLinear):
                lin = torch.nn.Linear(mod.in_features, mod.out_features, bias=mod.bias is not None,
                                      device=mod.weight.device, dtype=mod.weight.dtype)
                with torch.no_grad():
                    lin.weight.copy_(mod.weight)
                    if mod.bias is not None:
                        lin.bias.copy_(mod.bias)
                setattr(parent, k, lin)
                n += 1
    return n
