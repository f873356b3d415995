"""``calibrate(model, input_ids) -> RotationSet``: OSCAR's offline step (spec sections 1-2).

Pass 1 streams the calibration batches once to accumulate C_Q per KV head; that fixes Sigma_K and
hence R_K. Pass 2 streams them again for what needs the final C_Q: the score weights of Sigma_V
and a bounded uniform token sample on which the K and V clip ratios (R_V is only known at the end of
pass 2) and the optional Lloyd-Max levels are fitted.

Reading order: ``calibrate`` = ``collect_stats`` (the two streaming passes) + ``build_rotations``, whose
phases are named functions: ``key_rotations`` -> ``value_rotations`` -> ``fit_clips`` -> ``fit_levels``
-> ``_metadata``, each fitting for the serving ``QuantConfig``.

Departures from the authors' pipeline (spec sections 1-3), on purpose:
* prefill q/k/v come from a transformers forward (no SGLang dump files); chunk ``seq_len`` tokens.
* per-layer clip ratios are fitted (the released code only has global 0.96 / 0.92); a fitted ratio
  of 1.0 means no clipping.
* ``per_head=True`` (one rotation per KV head) is an option; the default is the paper's one per layer.
  On SmolLM2-135M (3 KV heads, d = 64) per-head rotations cut the held-out logit error ~20% vs
  Hadamard while the shared per-layer rotation is ~3% worse than Hadamard at group 64.
* Lloyd-Max levels are fitted after the clip ratio is chosen (with uniform levels), not jointly.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from ..quant import QuantConfig, log8_top
from ..rotation import COMPOSITIONS, RotationSet, config_hash, key_rescale, orthogonality_error, oscar_rotation, rotate
from .capture import attention_dims, capture_attention, check_all_layers, run_forward
from .clip import (
    DEFAULT_CLIP_GRID,
    DEFAULT_CLIP_K,
    DEFAULT_CLIP_V,
    KeyClipSearch,
    check_grid,
    clip_config,
    pick,
    value_clip_errors,
)
from .lloyd import fit_layer_levels
from .stats import QueryCovariance, RowMean, TokenReservoir, ValueCovariance, attention_mass
from ..rotation.centering import center as center_rows
from ..errors import InputError
from ..validation import check_token_ids

LEVELS = ("uniform", "lloyd-max")


def make_batches(input_ids, seq_len: int, batch_size: int) -> list[torch.Tensor]:
    """Cut a 1-D token tensor (or a list of sequences) into chunks of ``seq_len`` tokens and stack
    chunks of equal length into batches of at most ``batch_size`` rows (a shorter tail chunk of a
    sequence goes into a batch of its own length; nothing is padded, so no mask is needed)."""
    if seq_len < 1 or batch_size < 1:
        raise InputError("seq_len and batch_size must be >= 1")
    seqs = [input_ids] if isinstance(input_ids, torch.Tensor) and input_ids.ndim == 1 else list(input_ids)
    by_len: dict[int, list[torch.Tensor]] = {}
    for s in seqs:
        s = torch.as_tensor(s, dtype=torch.long).reshape(-1)
        for i in range(0, s.numel(), seq_len):
            c = s[i : i + seq_len]
            by_len.setdefault(c.numel(), []).append(c)
    return [torch.stack(cs[i : i + batch_size]) for cs in by_len.values() for i in range(0, len(cs), batch_size)]


def _rotations(covs: list[torch.Tensor], composition: str, per_head: bool):
    """[L, R, d, d] rotations and [L, R, d] eigenvalues from per-layer [H, d, d] covariances."""
    rots, eigs = [], []
    for layer, c in enumerate(covs):
        targets = list(c) if per_head else [c.mean(0)]  # the paper: one rotation per layer, heads averaged
        rs, ls = zip(*(oscar_rotation(t.cpu(), composition) for t in targets))
        for r in rs:
            err = orthogonality_error(r)
            if err > 1e-8:
                raise RuntimeError(f"layer {layer}: rotation is not orthogonal (max |RR^T - I| = {err:.2e})")
        rots.append(torch.stack(rs))
        eigs.append(torch.stack(ls))
    return torch.stack(rots), torch.stack(eigs)


@dataclass
class CalibrationStats:
    """Everything the streaming passes collect; ``build_rotations`` turns it into any RotationSet variant
    (composition, per-head, levels, centering) without another pass over the calibration text."""

    dims: object
    cq: list  # per layer [H_kv, d, d] C_Q
    k_mean: torch.Tensor  # [L, H_kv, d] float64, post-RoPE keys
    v_mean: torch.Tensor  # [L, H_kv, d] float64
    vcov: list  # per layer ValueCovariance
    sample: list | None  # per layer TokenReservoir (k, v, w of sampled tokens)
    n_tokens: int
    n_sequences: int
    seq_len: int
    sample_tokens: int
    seconds: float
    config: object = None
    name_or_path: str = ""
    # per layer [H_kv, d, d]: C_Q with each query weighted by its attention mass on the keys the cache
    # holds quantized (stats.attention_mass, windows ``attn_windows``); build_rotations(key_weighting=
    # "attention") fits R_K, the key rescale and the K clip for it instead of C_Q
    cq_attn: list | None = None
    attn_windows: tuple | None = None

    def key_cq(self, weighting: str = "uniform") -> list:
        """The query covariance that K's rotation and clip are fitted for."""
        if weighting == "uniform":
            return self.cq
        if self.cq_attn is None:
            raise InputError("key_weighting='attention' needs statistics collected with attention weights "
                             "(collect_stats(attn_windows='default'))")
        return self.cq_attn


KEY_WEIGHTINGS = ("uniform", "attention")


def _check_key_weighting(key_weighting: str) -> None:
    if key_weighting not in KEY_WEIGHTINGS:
        raise InputError(f"key_weighting must be one of {KEY_WEIGHTINGS}, got {key_weighting!r}")


def default_windows() -> tuple[int, int, int]:
    """The serving default (sink, recent, page) of ``methods.KVMethod``."""
    from ..methods import KVMethod

    m = KVMethod("oscar")
    return m.sink, m.recent, m.page


def held_mask(t: int, windows: tuple) -> torch.Tensor:
    """[T, T] bool: does query i read key j quantized, for a cache with windows (sink, recent, page)
    (the window rule, eval.banded.quantized_mask)."""
    from ..eval.banded import quantized_mask
    from ..methods import make_method

    sink, recent, page = windows
    pos = torch.arange(t)
    return quantized_mask(make_method("oscar", sink=sink, recent=recent, page=page), pos, pos)


def check_calibration_tokens(n_tokens: int, head_dim: int) -> None:
    """At least head_dim tokens (the CLI checks ``--tokens`` / ``--calib-tokens`` with it before the model loads)."""
    if n_tokens < head_dim:
        raise InputError(
            f"calibration got {n_tokens} tokens, fewer than head_dim={head_dim}: the covariances would be rank-"
            "deficient. Use a few thousand tokens (the paper uses 10K-30K)."
        )


def collect_stats(model, input_ids, seq_len: int = 1024, batch_size: int = 1, sample_tokens: int = 4096,
                  progress: bool = True, seed: int = 0, need_sample: bool = True,
                  attn_windows: tuple | str | None = None) -> CalibrationStats:
    """Pass 1: C_Q per KV head and the K/V means (and, with ``attn_windows`` (sink, recent, page) or
    "default" (the serving defaults), the attention-weighted C_Q for those windows: it computes every
    head's attention probabilities, ~5x the pass's time on 2 CPU cores, so it is off by default); pass 2: Sigma_V's running sums
    (w v v^T, w v, w) and a bounded uniform token sample. Memory is independent of the number of tokens."""
    if sample_tokens < 1:
        raise InputError(f"sample_tokens must be >= 1, got {sample_tokens}")
    dims = attention_dims(model, power_of_two=True)
    d, L = dims.head_dim, dims.num_layers
    if isinstance(input_ids, torch.Tensor):  # float ids would be truncated by make_batches
        check_token_ids("calibration input_ids", input_ids, model.get_input_embeddings().num_embeddings)
    batches = make_batches(input_ids, seq_len, batch_size)
    for b in batches:  # before the first pass: an id past the vocabulary fails (or asserts on CUDA) inside it
        check_token_ids("calibration input_ids", b, model.get_input_embeddings().num_embeddings)
    n_tokens = sum(b.numel() for b in batches)
    check_calibration_tokens(n_tokens, d)
    if attn_windows == "default":
        attn_windows = default_windows()
    was_training = model.training
    model.eval()
    t0 = time.perf_counter()
    try:
        # ---- pass 1: C_Q per KV head, mu_K and mu_V per KV head (centering, rotation/centering.py)
        qcov = [QueryCovariance(dims.num_kv_heads, d) for _ in range(L)]
        kmean = [RowMean(dims.num_kv_heads, d) for _ in range(L)]
        vmean = [RowMean(dims.num_kv_heads, d) for _ in range(L)]
        qcov_att = [QueryCovariance(dims.num_kv_heads, d) for _ in range(L)] if attn_windows else None
        held: dict[int, torch.Tensor] = {}
        seen: set[int] = set()

        def pass1(layer, q, k, v):
            qcov[layer].update(q.cpu())
            if qcov_att is not None:
                t = q.shape[2]
                if t not in held:
                    held[t] = held_mask(t, attn_windows)
                qcov_att[layer].update(q.cpu(), attention_mass(q.cpu(), k.cpu(), held[t]))
            kmean[layer].update(k.cpu())
            vmean[layer].update(v.cpu())
            seen.add(layer)

        with capture_attention(model, pass1):
            for i, b in enumerate(tqdm(batches, desc="calibrate 1/2 (C_Q)", disable=not progress)):
                run_forward(model, b)
                if i == 0:  # fail fast on a model whose attention we cannot see
                    check_all_layers(seen, dims, model)
        cq = [c.per_head() for c in qcov]
        # a chunk shorter than sink + recent has no quantized keys: fall back to C_Q there
        cq_attn = None if qcov_att is None else [a.per_head() if a.wsum is not None and bool((a.wsum > 0).all()) else c
                                                  for a, c in zip(qcov_att, cq)]

        # ---- pass 2: Sigma_V and the token sample (clip searches run on it afterwards)
        vcov = [ValueCovariance(c) for c in cq]
        gen = torch.Generator().manual_seed(seed)
        sample = [TokenReservoir(sample_tokens, gen) for _ in range(L)] if need_sample else None

        def pass2(layer, q, k, v):
            k, v = k.cpu(), v.cpu()
            w = vcov[layer].update(k, v)
            if sample:
                sample[layer].update(k, v, w)

        with capture_attention(model, pass2):
            for b in tqdm(batches, desc="calibrate 2/2 (Sigma_V, clip)", disable=not progress):
                run_forward(model, b)
    finally:
        model.train(was_training)
    return CalibrationStats(
        dims=dims, cq=cq, k_mean=torch.stack([m.mean() for m in kmean]), v_mean=torch.stack([m.mean() for m in vmean]),
        vcov=vcov, sample=sample, n_tokens=n_tokens, n_sequences=sum(b.shape[0] for b in batches), seq_len=seq_len,
        sample_tokens=sample_tokens, seconds=time.perf_counter() - t0, config=model.config,
        name_or_path=getattr(model.config, "name_or_path", "") or type(model).__name__,
        cq_attn=cq_attn, attn_windows=tuple(attn_windows) if attn_windows else None,
    )


def build_rotations(*args, **kwargs) -> RotationSet:
    """A RotationSet from collected statistics (see ``_build_rotations``). Runs on one thread: its work is
    many small eigh / elementwise ops, measured 3-80x faster single-threaded on the shared 2-core box
    (128x128 eigh: 8 ms vs 640 ms with 2 threads under load)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _build_rotations(*args, **kwargs)
    finally:
        torch.set_num_threads(n)


def _build_rotations(
    stats: CalibrationStats,
    composition: str = "u_h_pbr",
    group_size: int = 128,
    bits: int = 2,
    scale_dtype: str = "float16",
    fit_clip: bool = True,
    per_head: bool = False,
    levels: str = "uniform",
    center: bool = False,
    clip_grid=DEFAULT_CLIP_GRID,
    model_id: str | None = None,
    key_scale: bool = False,
    key_weighting: str = "uniform",
) -> RotationSet:
    """A RotationSet from collected statistics, in named phases: K rotations, V rotations, clip ratios,
    Lloyd-Max levels, metadata. ``group_size``, ``bits``, ``scale_dtype`` form the serving ``QuantConfig``
    every phase fits for. ``center``: fit R_V, clip ratios and levels for centered rows (k - mu_K,
    v - mu_V), as served by methods that center; the means are stored either way. ``key_weighting``
    "attention": fit R_K, the key rescale and the K clip for the attention-weighted C_Q (queries weighted
    by their attention mass on quantized keys, ``CalibrationStats.cq_attn``) instead of C_Q."""
    if stats.sample is None:
        raise InputError("building rotations needs the token sample (collect_stats(need_sample=True))")
    t0 = time.perf_counter()
    quant = QuantConfig(bits, group_size, None, scale_dtype)
    grid = _check_recipe(stats.dims.head_dim, composition, levels, quant, clip_grid)
    _check_key_weighting(key_weighting)
    kcq = stats.key_cq(key_weighting)
    rows = _SampleRows(stats, center)
    k_rot, k_eig, k_qrot = key_rotations(stats, rows, composition, per_head, key_scale, kcq)
    v_rot, v_eig = value_rotations(stats, composition, per_head, center)
    clips = fit_clips(stats, rows, quant, grid if fit_clip else None, k_rot, k_qrot, v_rot, kcq)
    k_top, v_top = scale_tops(stats, rows, quant, clips, k_rot, v_rot)
    k_lv, v_lv = fit_levels(stats, rows, quant, clips, k_rot, v_rot) if levels == "lloyd-max" else (None, None)
    meta = _metadata(stats, quant, composition, per_head, levels, center, key_scale, grid if fit_clip else None,
                     clips, model_id, seconds=time.perf_counter() - t0)
    if key_weighting != "uniform":  # files without the key are "uniform" (older files included)
        meta["key_weighting"] = key_weighting
        meta["attn_windows"] = list(stats.attn_windows)
    return RotationSet(
        k_rotation=k_rot, v_rotation=v_rot,
        k_eigenvalues=k_eig.float(), v_eigenvalues=v_eig.float(),
        k_clip=torch.tensor(clips.k, dtype=torch.float32), v_clip=torch.tensor(clips.v, dtype=torch.float32),
        k_levels=None if k_lv is None else k_lv.float(), v_levels=None if v_lv is None else v_lv.float(),
        k_mean=stats.k_mean.float(), v_mean=stats.v_mean.float(), k_query_rotation=k_qrot,
        k_scale_top=k_top, v_scale_top=v_top, meta=meta,
    )


class _SampleRows:
    """A layer's sampled K or V rows as [1, H, N, d] float32, centered when fitting for centered serving,
    and the score weights of its values normalised to mean ~1 per head."""

    def __init__(self, stats: CalibrationStats, center: bool):
        self.stats, self.center = stats, center

    def __call__(self, kind: str, i: int) -> torch.Tensor:
        s = self.stats.sample[i]
        x = (s.k if kind == "k" else s.v).transpose(0, 1)[None]
        mu = self.stats.k_mean if kind == "k" else self.stats.v_mean
        return center_rows(x, mu[i].float()) if self.center else x

    def wbar(self, i: int) -> torch.Tensor:
        """[N, H] score weights of layer i's sampled values, mean ~1 per head."""
        return self.stats.sample[i].w / self.stats.vcov[i].mean_weight().clamp_min(1e-300)


def key_rotations(stats: CalibrationStats, rows: _SampleRows, composition: str, per_head: bool, key_scale: bool,
                  kcq: list | None = None):
    """Phase 1: R_K per layer from C_Q (``kcq``, default ``stats.cq``; float32 [L, R, d, d]), its
    eigenvalues, and with ``key_scale`` the exact per-direction rescale: keys through M = S.R, queries
    through S^-1.R (rotation/build.py)."""
    kcq = stats.cq if kcq is None else kcq
    k_rot, k_eig = _rotations(kcq, composition, per_head)
    if not key_scale:
        return k_rot.float(), k_eig, None
    ms, qs = [], []
    for i, cq in enumerate(kcq):
        kx = stats.sample[i].k.double()  # [N, H, d]
        if rows.center:
            kx = kx - stats.k_mean[i].double()[None]
        m2 = torch.einsum("nhd,nhe->hde", kx, kx) / kx.shape[0]  # [H, d, d]
        targets = list(zip(cq, m2)) if per_head else [(cq.mean(0), m2.mean(0))]
        sm = [key_rescale(c, k2) for c, k2 in targets]
        ms.append(torch.stack([s_ @ r for (s_, _), r in zip(sm, k_rot[i])]))
        qs.append(torch.stack([si @ r for (_, si), r in zip(sm, k_rot[i])]))
    return torch.stack(ms).float(), k_eig, torch.stack(qs).float()


def value_rotations(stats: CalibrationStats, composition: str, per_head: bool, center: bool):
    """Phase 2: R_V per layer from the score-weighted Sigma_V (of centered values with ``center``)."""
    covs = [c.per_head(stats.v_mean[i] if center else None) for i, c in enumerate(stats.vcov)]
    v_rot, v_eig = _rotations(covs, composition, per_head)
    return v_rot.float(), v_eig


@dataclass
class ClipFit:
    k: list  # chosen rho per layer
    v: list
    k_errors: list  # per layer, per candidate (only when fitted)
    v_errors: list
    k_rel: list  # INT error / spread of what attention sees, at the chosen rho (quality_warning)
    v_rel: list


def fit_clips(stats: CalibrationStats, rows: _SampleRows, quant: QuantConfig, grid, k_rot, k_qrot, v_rot,
              kcq: list | None = None) -> ClipFit:
    """Phase 3: clip ratio per layer for K and V (``grid`` None: the paper's 0.96 / 0.92), searched on the
    token sample (over every token it cost 2-3x the forward pass on 2 CPU cores, and a 4096-token uniform
    sample picks the same ratios on the 0.02 grid), and the relative error at the chosen ratio."""
    fit = ClipFit([], [], [], [], [], [])
    kcq = stats.cq if kcq is None else kcq  # the query covariance the K error is measured with
    for i in range(stats.dims.num_layers):
        kg, vg = (grid, grid) if grid is not None else ((DEFAULT_CLIP_K,), (DEFAULT_CLIP_V,))
        ks = KeyClipSearch(k_rot[i], kcq[i], quant, kg, None if k_qrot is None else k_qrot[i])
        ks.update(rows("k", i))
        ke = ks.errors()
        wbar = rows.wbar(i)
        ve = value_clip_errors(rows("v", i)[0].transpose(0, 1), wbar, v_rot[i], quant, vg)
        fit.k.append(pick(kg, ke))
        fit.v.append(pick(vg, ve))
        if grid is not None:
            fit.k_errors.append(ke.tolist())
            fit.v_errors.append(ve.tolist())
        # error relative to what attention can see: the spread of the logits over keys (centered keys:
        # the common shift q.mu_K does not change softmax) and the spread of the values
        s = stats.sample[i]
        kc = center_rows(s.k.transpose(0, 1)[None], stats.k_mean[i].float())[0].double()  # [H, N, d]
        logit_var = ((kc @ kcq[i].to(kc.device)) * kc).sum(-1).mean()
        vc = center_rows(s.v.transpose(0, 1)[None], stats.v_mean[i].float())[0].double()
        v_var = (wbar.double().transpose(0, 1) * vc.pow(2).sum(-1)).mean()
        fit.k_rel.append(float(ke[kg.index(fit.k[-1])] / logit_var.clamp_min(1e-30)))
        fit.v_rel.append(float(ve[vg.index(fit.v[-1])] / v_var.clamp_min(1e-30)))
    return fit


# octaves above the sample's largest scale that the log8 format's top leaves for rows the sample did not see
SCALE_TOP_HEADROOM = 2


def scale_tops(stats: CalibrationStats, rows: _SampleRows, quant: QuantConfig, clips: ClipFit, k_rot, v_rot):
    """Phase 3b: the log8 format's scale_top per layer for K and V (``quant.log8_top`` of the rotated sample rows
    under the chosen clip, ``SCALE_TOP_HEADROOM`` octaves up: ~6 of the format's 8 octaves stay below the sample's
    largest scale). float32 [L] tensors of integers."""
    k_t, v_t = [], []
    for i in range(stats.dims.num_layers):
        k_t.append(log8_top(rotate(rows("k", i), k_rot[i]), clip_config(quant, clips.k[i]), SCALE_TOP_HEADROOM))
        v_t.append(log8_top(rotate(rows("v", i), v_rot[i]), clip_config(quant, clips.v[i]), SCALE_TOP_HEADROOM))
    return torch.tensor(k_t, dtype=torch.float32), torch.tensor(v_t, dtype=torch.float32)


def fit_levels(stats: CalibrationStats, rows: _SampleRows, quant: QuantConfig, clips: ClipFit, k_rot, v_rot):
    """Phase 4: Lloyd-Max levels per layer for K and V, fitted after (and for) the chosen clip ratio."""
    k_lv, v_lv = [], []
    for i in range(stats.dims.num_layers):
        xk = rotate(rows("k", i), k_rot[i])
        xv = rotate(rows("v", i), v_rot[i])
        k_lv.append(fit_layer_levels(xk, clip_config(quant, clips.k[i])))
        v_lv.append(fit_layer_levels(xv, clip_config(quant, clips.v[i]), row_weight=rows.wbar(i).transpose(0, 1)[None]))
    return torch.stack(k_lv), torch.stack(v_lv)


def _metadata(stats: CalibrationStats, quant: QuantConfig, composition: str, per_head: bool, levels: str,
              center: bool, key_scale: bool, grid, clips: ClipFit, model_id: str | None, seconds: float) -> dict:
    """Phase 5: the rotation file's metadata (what was calibrated, how, and the clip diagnostics)."""
    d = stats.dims.head_dim
    return {
        "model_id": model_id or stats.name_or_path,
        "config_hash": config_hash(stats.config),
        "num_layers": stats.dims.num_layers,
        "num_kv_heads": stats.dims.num_kv_heads,
        "head_dim": d,
        "group_size": quant.group(d),
        "bits": quant.bits,
        "scale_dtype": quant.scale_dtype,
        "calib_tokens": stats.n_tokens,
        "calib_sequences": stats.n_sequences,
        "seq_len": stats.seq_len,
        "composition": composition,
        "objective": f"k=qqt_{composition},v=sst_{composition}",
        "per_head": per_head,
        "levels": levels,
        "centered": bool(center),
        "key_scale": bool(key_scale),
        "clip": "fitted" if grid is not None else "default",
        "clip_candidates": list(grid) if grid is not None else [],
        "clip_errors": {"k": clips.k_errors, "v": clips.v_errors},  # per layer, per candidate (diagnostics)
        # per layer: INT error / spread of what attention sees (K: logit variance over keys, V: score-
        # weighted value variance), at the chosen clip; see quality_warning
        "relative_error": {"k": [round(x, 6) for x in clips.k_rel], "v": [round(x, 6) for x in clips.v_rel]},
        "sample_tokens": stats.sample_tokens,
        "calib_seconds": round(stats.seconds + seconds, 2),
    }


def calibrate(model, input_ids, seq_len: int = 1024, batch_size: int = 1, sample_tokens: int = 4096,
              progress: bool = True, seed: int = 0, **recipe) -> RotationSet:
    """Calibrate OSCAR rotations (R_K from Sigma_K = mean_h C_Q, R_V from the score-weighted Sigma_V),
    per-layer clip ratios and optionally Lloyd-Max levels for ``model`` on ``input_ids``:
    ``collect_stats`` (two streaming passes) then ``build_rotations(stats, **recipe)``.

    input_ids:     1-D LongTensor of tokens (cut into ``seq_len`` chunks) or a list of sequences.
    sample_tokens: tokens per layer kept for the clip searches and the Lloyd-Max fit.
    recipe:        ``build_rotations``'s keywords, checked before the passes start:
      composition  one of rotation.COMPOSITIONS ("u_h_pbr" is OSCAR; others are ablations).
      group_size, bits, scale_dtype: the serving QuantConfig the clip search and levels are fitted for.
      fit_clip     grid-search rho per layer over ``clip_grid`` (1.0 = off is always included);
                   False stores the paper's global 0.96 / 0.92.
      per_head     one rotation per KV head instead of one per layer.
      levels       "uniform" or "lloyd-max" (fit k_levels / v_levels, see calibrate/lloyd.py).
      center       fit R_V, clips and levels for centered rows (the per-KV-head means mu_K, mu_V are
                   stored in every file; methods that center use them, see rotation/centering.py).
      key_scale, key_weighting, model_id: see ``build_rotations`` (key_weighting="attention" also makes
                   the first pass collect the attention-weighted C_Q).
    """
    a = inspect.signature(_build_rotations).bind(None, **recipe)  # an unknown keyword fails here
    a.apply_defaults()
    a = a.arguments
    _check_key_weighting(a["key_weighting"])  # before the statistics pass
    _check_recipe(attention_dims(model, power_of_two=True).head_dim, a["composition"], a["levels"],
                  QuantConfig(a["bits"], a["group_size"], None, a["scale_dtype"]), a["clip_grid"])
    stats = collect_stats(model, input_ids, seq_len, batch_size, sample_tokens, progress, seed,
                          attn_windows="default" if a["key_weighting"] == "attention" else None)
    return build_rotations(stats, **recipe)


def _check_recipe(head_dim: int, composition: str, levels: str, quant: QuantConfig, clip_grid) -> tuple:
    """What build_rotations refuses, checked before any work; returns the clip grid (1.0 included)."""
    if composition not in COMPOSITIONS:
        raise InputError(f"unknown composition {composition!r}; choose one of {COMPOSITIONS}")
    if levels not in LEVELS:
        raise InputError(f"levels must be one of {LEVELS}, got {levels!r}")
    quant.group(head_dim)  # a group size that does not divide head_dim
    return check_grid(clip_grid)


# A calibration whose measured relative INT error is this far above the usual is flagged. Measured
# (docs/ACCURACY.md): see REL_ERROR_LIMIT's justification there.
REL_ERROR_LIMIT = 1.0


def quality_warning(rs: RotationSet, limit: float = REL_ERROR_LIMIT) -> str | None:
    """One line for the user when the quantization error that calibration measured is far above the
    usual (e.g. token-wise INT2 on uncentered keys of a model with q/k/v biases), else None."""
    rel = rs.meta.get("relative_error") or {}
    worst = []
    for kind in ("k", "v"):
        vals = rel.get(kind) or []
        if vals:
            i = max(range(len(vals)), key=lambda j: vals[j])
            if vals[i] > limit:
                worst.append(f"{kind.upper()} error {vals[i]:.2f}x its signal spread in layer {i}")
    if not worst:
        return None
    fix = ("calibrate with --plus (exact centering) and use method oscar-plus"
           if not rs.meta.get("centered") else "use kivi or int4 for this model, or keep larger BF16 windows")
    return (f"this model's activations defeat {rs.meta.get('bits', 2)}-bit token-wise quantization as calibrated "
            f"({'; '.join(worst)}; usual is < {limit:g}): expect large accuracy loss; {fix}")
