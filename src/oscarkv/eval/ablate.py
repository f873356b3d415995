"""Ablations: which part of OSCAR buys how much accuracy (``oscar-kv ablate``).

Each ablation is a function of an ``Ablator`` (model + token ids, no tokenizer) returning a JSON-ready
dict whose ``rows`` carry the harness metrics (ppl, KL to BF16, top-1, bits) per variant. All run
through the banded evaluation (== decoding through the cache) on the same pydoc-eval window, the BF16
reference computed once. Pure INT2 (sink = recent = 0) everywhere except the windows ablation: with
BF16 windows most of the difference between quantizers is hidden by the full-precision tokens.

Rotation variants are derived from one calibration: the file stores R = U.H.P_br and the eigenvalues
that fixed P_br, so U = R.P_br^T.H (H is its own inverse) and every composition of U, H and P_br
follows without another pass over the calibration text.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import torch
from tqdm.auto import tqdm

from ..errors import InputError
from ..methods import make_method as _make_method
from ..rotation import RotationSet, compose, recover_eigenvectors
from .harness import evaluate

ABLATIONS = ("rotation", "clipping", "windows", "group", "calib-size", "calib-domain", "levels", "centering")
PURE = "pure INT2 (sink = recent = 0)"
COMPOSITION_LABELS = {  # rotation.COMPOSITIONS entries in the order of the table
    "identity": "none (identity)",
    "h": "Hadamard only",
    "u": "eigenvectors U only",
    "u_h": "U.H",
    "u_h_pbr": "U.H.P_br (OSCAR)",
}


def make_method(name, **kw):
    """Methods of the ablations demote token by token (page 1): with sink = recent = 0 nothing stays in
    BF16 (a page of 16 would keep the last 0-15 tokens of every query in BF16)."""
    return _make_method(name, **{"page": 1, **kw})


def _log(msg: str) -> None:
    print(f"[oscar-kv ablate] {msg}", file=sys.stderr, flush=True)


class Ablator:
    """Shared state of an ablation run: model, token ids, memoized calibrations and scores.

    calib: {source name: 1-D token ids} (at least "pydoc-calib"; "stdlib-docstrings" for calib-domain).
    """

    def __init__(self, model, eval_ids: torch.Tensor, calib: dict, context: int = 2048,
                 calib_tokens: int = 4096, score_from: int | None = None, seq_len: int = 1024,
                 progress: bool = True):
        self.model, self.eval_ids, self.calib = model, eval_ids, calib
        self.context, self.calib_tokens, self.seq_len = context, calib_tokens, seq_len
        self.score_from = score_from if score_from is not None else self.default_score_from(context)
        self.progress = progress
        self.reference: dict = {}  # evaluate()'s BF16 cache, shared by every call
        self._scores: dict = {}
        self._rots: dict = {}

    @staticmethod
    def default_score_from(context: int) -> int:
        """First scored position of an ablation: min(512, context // 4); refuses a context with nothing to score."""
        sf = min(512, context // 4)
        if not 0 < sf < context - 1:  # evaluate()'s rule, checked here before the model loads and calibrates
            raise InputError(f"context {context} is too short for an ablation (it scores positions "
                             f"context // 4 .. context - 2); use a context of 4 tokens or more (e.g. 2048)")
        return sf

    @staticmethod
    def check_calib(calib: dict, tokens: int) -> None:
        """Every calibration text holds ``tokens`` tokens (the CLI checks this before the model loads;
        ``stats`` again, when a text is first used)."""
        for source, ids in calib.items():
            if ids.numel() < tokens:
                raise InputError(f"calibration text {source!r} has {ids.numel()} tokens, {tokens} asked for; "
                                 "ask for fewer (--calib-tokens)")

    # ------------------------------------------------------------ calibration
    def stats(self, source: str = "pydoc-calib", tokens: int | None = None):
        """Calibration statistics (one streaming pass), memoized: every rotation variant is built from them."""
        from ..calibrate import collect_stats

        tokens = tokens or self.calib_tokens
        key = ("stats", source, tokens)
        if key not in self._rots:
            ids = self.calib[source]
            self.check_calib({source: ids}, tokens)
            t = time.time()
            self._rots[key] = collect_stats(self.model, ids[:tokens], seq_len=min(self.seq_len, tokens),
                                            progress=self.progress)
            _log(f"calibration statistics from {tokens} tokens of {source} in {time.time() - t:.0f} s")
        return self._rots[key]

    def rotations(self, source: str = "pydoc-calib", tokens: int | None = None, group_size: int = 128,
                  composition: str = "u_h_pbr", per_head: bool = False, center: bool = False,
                  key_scale: bool = False, levels: str = "lloyd-max") -> RotationSet:
        """Calibrated rotations (fitted clip, Lloyd-Max levels unless ``levels="uniform"``), memoized; built
        from ``stats``."""
        from ..calibrate import build_rotations

        tokens = tokens or self.calib_tokens
        key = (source, tokens, group_size, composition, per_head, center, key_scale) + (() if levels == "lloyd-max" else (levels,))
        if key not in self._rots:
            st = self.stats(source, tokens)
            t = time.time()
            rs = build_rotations(st, composition=composition, group_size=group_size, per_head=per_head,
                                 levels=levels, center=center, key_scale=key_scale)
            _log(f"built {composition}{' per head' if per_head else ''}{' centered' if center else ''}"
                 f"{' key-scaled' if key_scale else ''} (group {group_size}) in {time.time() - t:.0f} s")
            self._rots[key] = rs
        return self._rots[key]

    def composition(self, name: str) -> RotationSet:
        """The base calibration with its rotations re-composed as ``name`` (clip/levels kept)."""
        key = ("composition", name)
        if key not in self._rots:
            base = self.rotations()
            k, v = derive_composition(base.k_rotation, base.k_eigenvalues, name), derive_composition(
                base.v_rotation, base.v_eigenvalues, name)
            self._rots[key] = replace(base, k_rotation=k, v_rotation=v, meta={**base.meta, "composition": name})
        return self._rots[key]

    # ------------------------------------------------------------ scoring
    def score(self, variant: str, method, rotations: RotationSet | None = None, **extra) -> dict:
        """Harness row (ppl, kl, top1, bits_per_element, ...) of ``method`` plus ``variant`` and ``extra``."""
        key = (method, id(rotations))
        if key not in self._scores:
            res = evaluate(self.model, self.eval_ids, [make_method("bf16"), method], rotations, context=self.context,
                           sequences=1, score_from=self.score_from, progress=False, reference=self.reference)
            self._scores[key] = (res["results"][-1], next(r for r in res["results"] if r["method"] == "bf16"))
        row, ref = self._scores[key]
        self.bf16 = ref
        return {"variant": variant, **extra, **row}

    def header(self) -> dict:
        return {"context": self.context, "score_from": self.score_from,
                "scored_tokens": self.context - 1 - self.score_from, "calib_tokens": self.calib_tokens}


def derive_composition(r: torch.Tensor, eigenvalues: torch.Tensor | None, name: str) -> torch.Tensor:
    """Re-compose u_h_pbr rotations [L, R, d, d] (float32 in the file) as another composition:
    U recovered from each R (``rotation.recover_eigenvectors``), then ``rotation.compose``.

    P_br is rebuilt from the stored eigenvalues; that equals the calibration's P only when they are
    strictly ascending in float32 (ties would reorder), so refuse otherwise rather than guess."""
    if eigenvalues is None:
        raise InputError("the rotation file has no eigenvalues; cannot derive compositions from it")
    if name not in COMPOSITION_LABELS:
        raise InputError(f"cannot derive composition {name!r}; choose from {tuple(COMPOSITION_LABELS)}")
    out = torch.empty_like(r)
    for layer in range(r.shape[0]):
        for head in range(r.shape[1]):
            lam = eigenvalues[layer, head]
            if name not in ("identity", "h") and not bool((lam[1:] > lam[:-1]).all()):
                raise InputError(f"layer {layer}: eigenvalues are not strictly ascending in the file; "
                                 "calibrate each composition instead (`oscar-kv calibrate --composition`)")
            u = recover_eigenvectors(r[layer, head].double(), lam, "u_h_pbr")
            out[layer, head] = compose(u, lam, name).float()
    return out


def _oscar(**kw):
    return make_method("oscar", **{"sink": 0, "recent": 0, **kw})


def _bar(ab: Ablator, items, desc: str):
    return tqdm(items, desc=f"ablate {desc}", unit="eval", disable=not ab.progress)


# ---------------------------------------------------------------- the ablations
def ablate_rotation(ab: Ablator) -> dict:
    rows = []
    jobs = [(c, clip) for clip in ("off", "default") for c in COMPOSITION_LABELS] + [("u_h_pbr", "fitted")]
    for comp, clip in _bar(ab, jobs, "rotation"):
        rows.append(ab.score(COMPOSITION_LABELS[comp], _oscar(clip=clip), ab.composition(comp),
                             composition=comp, series=f"clip {clip}"))
    # the option beyond the paper: one rotation per KV head (its own calibration)
    rows.append(ab.score("U.H.P_br per KV head", _oscar(clip="fitted"), ab.rotations(per_head=True),
                         composition="u_h_pbr", series="clip fitted", per_head=True))
    return {"name": "rotation", "setting": PURE, "rows": rows,
            "notes": ["All variants come from one calibration (U recovered from R = U.H.P_br).",
                      "clip default = the paper's 0.96 (K) / 0.92 (V); fitted ratios were fitted for U.H.P_br.",
                      "Group = head_dim = 64, so P_br only permutes coordinates within the one group: U.H and "
                      "U.H.P_br differ by float rounding only (see the group ablation for G = 32). Pure INT2 "
                      "amplifies such rounding: their gap is this setup's noise floor."]}


def ablate_clipping(ab: Ablator) -> dict:
    rot = ab.composition("u_h_pbr")
    jobs = [("oscar", c) for c in ("off", "default", "fitted")] + [("hadamard", c) for c in ("off", "default")]
    rows = []
    for name, clip in _bar(ab, jobs, "clipping"):
        m = make_method(name, sink=0, recent=0, clip=clip)
        rows.append(ab.score(f"{name}, clip {clip}", m, rot if name == "oscar" else None, series=name, clip=clip))
    # control: is the gain of fitted clipping OSCAR's, or would Hadamard get it too? (own calibration)
    rows.append(ab.score("hadamard, clip fitted", _oscar(clip="fitted"), ab.rotations(composition="h"),
                         series="hadamard", clip="fitted"))
    k, v = ab.rotations().k_clip, ab.rotations().v_clip
    return {"name": "clipping", "setting": PURE, "rows": rows,
            "fitted_clip": {"k": [round(float(x), 3) for x in k], "v": [round(float(x), 3) for x in v]},
            "notes": ["off: min/max of each row; default: 0.96 / 0.92 (spec section 2); "
                      "fitted: per-layer ratios from the calibration grid (1.0 = off).",
                      "hadamard, clip fitted: the data-free H with ratios fitted for H by the same calibration "
                      "code (composition 'h')."]}


def ablate_windows(ab: Ablator, sizes=(0, 16, 64, 256)) -> dict:
    rot = ab.composition("u_h_pbr")
    jobs = [(name, which, s) for name in ("hadamard", "oscar") for which in ("sink", "recent") for s in sizes]
    rows = []
    for name, which, s in _bar(ab, jobs, "windows"):
        sink, recent = (s, 0) if which == "sink" else (0, s)
        m = make_method(name, sink=sink, recent=recent)
        rows.append(ab.score(f"{name}, {which} {s}", m, rot if name == "oscar" else None,
                             series=f"{name}, vary {which}", x=s, sink=sink, recent=recent))
    return {"name": "windows", "setting": "BF16 windows varied one at a time (the other is 0)", "rows": rows,
            "notes": ["Methods as in the registry: hadamard without clipping, oscar with its fitted clip.",
                      "Windows are BF16 tokens: bits per element rise with them (see bits_per_element).",
                      f"Scored positions start at {ab.score_from}, so a recent window of r tokens keeps the "
                      "last r tokens of every scored query's context in BF16."]}


def ablate_group(ab: Ablator, sizes=(32, 64)) -> dict:
    rows = []
    jobs = [(g, v) for g in sizes for v in ("naive", "hadamard", "u_h", "u_h_pbr")]
    for g, v in _bar(ab, jobs, "group"):
        if v in ("naive", "hadamard"):
            m, rot, label = make_method(v, sink=0, recent=0, group_size=g, clip="default"), None, v
        else:  # fixed clip ratios for all: the fitted ones were fitted for the calibration's group size
            m, rot = _oscar(group_size=g, clip="default"), ab.composition(v)
            label = "oscar " + ("U.H.P_br" if v == "u_h_pbr" else "U.H (no P_br)")
        rows.append(ab.score(f"{label}, G={g}", m, rot, series=label, x=g, group_size=g))
    d = ab.rotations().head_dim
    return {"name": "group", "setting": PURE + ", every row with the default clip 0.96 / 0.92", "rows": rows,
            "notes": [f"head_dim is {d}: a group of 128 is clamped to {d}, so G=128 == G={d} on this model.",
                      "P_br spreads the largest-eigenvalue directions over different groups; it can only "
                      "matter when G < head_dim."]}


def _hadamard_reference(ab: Ablator) -> dict:
    return ab.score("hadamard (data-free, clip 0.96/0.92)", make_method("hadamard", sink=0, recent=0, clip="default"),
                    series="hadamard")


def ablate_calib_size(ab: Ablator, sizes=(1024, 4096, 16384)) -> dict:
    avail = ab.calib["pydoc-calib"].numel()
    sizes = sorted({min(s, avail) for s in sizes})
    rows = [_hadamard_reference(ab)]
    for n in _bar(ab, sizes, "calib-size"):
        rows.append(ab.score(f"oscar, {n} calib tokens", _oscar(), ab.rotations(tokens=n), series="oscar", x=n))
    return {"name": "calib-size", "setting": PURE, "rows": rows,
            "notes": [f"pydoc-calib has {avail} tokens: sizes are capped there."]}


def ablate_calib_domain(ab: Ablator, other: str = "stdlib-docstrings") -> dict:
    rows = [_hadamard_reference(ab)]
    for src in _bar(ab, ["pydoc-calib", other], "calib-domain"):
        rows.append(ab.score(f"oscar, calibrated on {src}", _oscar(), ab.rotations(src), series="oscar", calib_data=src))
    return {"name": "calib-domain", "setting": PURE + "; evaluated on pydoc-eval", "rows": rows,
            "notes": ["pydoc-calib and pydoc-eval are disjoint topics of the same manual (in-domain); "
                      f"{other} is a different kind of text (out-of-domain)."]}


def ablate_levels(ab: Ablator) -> dict:
    from ..calibrate import LEVELS

    if "lloyd-max" not in LEVELS:
        return {"name": "levels", "skipped": "calibrate() has no levels='lloyd-max' in this version"}
    rot = ab.composition("u_h_pbr")
    rows = [ab.score(f"oscar, {lv} levels", _oscar(levels=lv), rot, series="oscar", levels=lv)
            for lv in _bar(ab, ["uniform", "lloyd-max"], "levels")]
    return {"name": "levels", "setting": PURE + ", fitted clip", "rows": rows,
            "notes": ["Lloyd-Max levels are fitted per layer on the calibration sample (calibrate/lloyd.py)."]}


def ablate_centering(ab: Ablator) -> dict:
    """Issue 10: centering, the calibrated U vs plain H (both with fitted clip, both centered), and the
    oscar-plus build-up (per-KV-head rotations, Lloyd-Max levels, key rescale), pure INT2."""
    uni = dict(levels="uniform")  # Lloyd-Max levels only where a row uses them (the fit is the slow part)
    h_c = ab.rotations(composition="h", center=True, **uni)
    h_u = ab.rotations(composition="h", **uni)
    o_u = ab.rotations(**uni)
    o_c = ab.rotations(center=True, **uni)
    o_hc = ab.rotations(center=True, per_head=True)
    o_hcs = ab.rotations(center=True, per_head=True, key_scale=True)
    jobs = [
        ("hadamard, no clip", make_method("hadamard+nocenter", sink=0, recent=0), h_u, "not centered"),
        ("H + fitted clip", _oscar(), h_u, "not centered"),
        ("U.H.P_br + fitted clip (OSCAR)", _oscar(), o_u, "not centered"),
        ("hadamard, no clip", make_method("hadamard+center", sink=0, recent=0), h_c, "centered"),
        ("H + fitted clip", _oscar(center="on"), h_c, "centered"),
        ("U.H.P_br + fitted clip", _oscar(center="on"), o_c, "centered"),
        ("U.H.P_br per KV head + fitted clip", _oscar(center="on"), o_hc, "centered"),
        ("per KV head + Lloyd-Max", _oscar(center="on", levels="lloyd-max"), o_hc, "centered"),
        ("per KV head + Lloyd-Max + key rescale", _oscar(center="on", levels="lloyd-max"), o_hcs, "centered"),
    ]
    rows = [ab.score(label, m, rot, series=series) for label, m, rot, series in _bar(ab, jobs, "centering")]
    return {"name": "centering", "setting": PURE, "rows": rows,
            "notes": ["All rotation files come from one pass of calibration statistics (collect_stats); "
                      "'centered' rows store k - mu_K and v - mu_V (calibrated per KV head) and were fitted "
                      "(clip, levels, R_V) for centered rows.",
                      "H + fitted clip is the data-free Hadamard with clip ratios (and levels) fitted by the same "
                      "code; comparing it with U.H.P_br answers whether the calibrated U matters.",
                      "key rescale: keys through S.R, queries through S^-1.R with S = U diag(s) U^T, "
                      "s_i = (lambda_i / kappa_i)^(1/4) (rotation/build.py key_rescale)."]}


FUNCS = {"rotation": ablate_rotation, "clipping": ablate_clipping, "windows": ablate_windows,
         "group": ablate_group, "calib-size": ablate_calib_size, "calib-domain": ablate_calib_domain,
         "levels": ablate_levels, "centering": ablate_centering}


def run_one(ab: Ablator, name: str, **kw) -> dict:
    if name not in FUNCS:
        raise InputError(f"unknown ablation {name!r}; choose from {', '.join(ABLATIONS)}")
    t = time.time()
    res = FUNCS[name](ab, **kw)
    if "skipped" not in res:
        res = {**res, **ab.header(), "bf16_ppl": ab.bf16["ppl"], "seconds": round(time.time() - t, 1)}
    return res
