"""Implementations of the `oscar-kv` sub-commands (argparse namespaces in, exit codes out)."""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import sys
import time
from pathlib import Path

import torch


def _log(msg: str) -> None:
    print(f"[oscar-kv] {msg}", file=sys.stderr, flush=True)


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def _load(model: str):
    from ..models import load_model

    t = time.time()
    lm = load_model(model)
    _log(f"loaded {lm.model_id} in {time.time() - t:.1f} s")
    return lm


def _calibrate(lm, data: str, tokens: int, seq_len: int = 1024, **kw):
    from ..calibrate import calibrate
    from ..data import load_text, token_ids

    ids = token_ids(lm.tokenizer, load_text(data), tokens, what=f"calibration text {data!r}")
    t = time.time()
    rs = calibrate(lm.model, ids, seq_len=min(seq_len, tokens), model_id=lm.model_id, **kw)
    rs.meta["calib_data"] = data
    _log(f"calibrated on {ids.numel()} tokens of {data!r} in {time.time() - t:.1f} s")
    return rs


# --------------------------------------------------------------------------- calibrate
def cmd_calibrate(a) -> int:
    from ..methods import PLUS_KEY_SCALE

    out = Path(a.out)
    if out.suffix != ".safetensors":
        raise ValueError(f"--out {out} should end in .safetensors (the rotation file format)")
    lm = _load(a.model)
    plus = getattr(a, "plus", False)
    rs = _calibrate(lm, a.data, a.tokens, a.seq_len, composition=a.composition, group_size=a.group_size,
                    fit_clip=not a.no_fit_clip, per_head=a.per_head or plus,
                    levels="lloyd-max" if plus else a.levels, center=getattr(a, "center", False) or plus,
                    key_scale=PLUS_KEY_SCALE if getattr(a, "key_scale", None) is None and plus
                    else bool(getattr(a, "key_scale", None)))
    _warn_quality(rs)
    rs.save(out)
    kc = rs.k_clip.tolist() if rs.k_clip is not None else []
    vc = rs.v_clip.tolist() if rs.v_clip is not None else []
    print(json.dumps({"out": str(out), "layers": rs.num_layers, "head_dim": rs.head_dim,
                      "k_clip": [round(x, 3) for x in kc], "v_clip": [round(x, 3) for x in vc]}))
    return 0


def _warn_quality(rs) -> None:
    from ..calibrate import quality_warning

    msg = quality_warning(rs)
    if msg:
        _log("WARNING: " + msg)


# --------------------------------------------------------------------------- eval
def _eval_table(lm, ids, methods, rotations, context, sequences, score_from, peers, peer_residual, reference=None):
    from ..eval.harness import evaluate

    res = evaluate(lm.model, ids, methods, rotations, context=context, sequences=sequences,
                   score_from=score_from, peers=peers, peer_residual=peer_residual, reference=reference)
    res = {"model": lm.model_id, **res}
    return res


def cmd_eval(a) -> int:
    from ..data import load_text, token_ids
    from ..eval.report import format_table, plot_error_vs_bits, write_json
    from ..methods import parse_methods
    from ..rotation import RotationSet

    methods = parse_methods(a.methods, sink=a.sink, recent=a.recent, group_size=a.group_size, levels=a.levels)
    needs_rot = any(m.rotation == "calibrated" for m in methods)
    if needs_rot and not a.rotations:
        raise ValueError("method oscar needs --rotations ROT.safetensors (make one with `oscar-kv calibrate`)")
    peers = tuple(p.strip() for p in a.peers.split(",") if p.strip())
    lm = _load(a.model)
    rot = RotationSet.load(a.rotations, lm.model.config) if a.rotations else None
    plus_path = getattr(a, "plus_rotations", None)
    if plus_path:
        rot = {"*": RotationSet.load(plus_path, lm.model.config), **({"oscar": rot} if rot is not None else {})}
    if a.task == "passkey":
        from ..eval.passkey import run_passkey, format_passkey

        lengths = [int(x) for x in a.lengths.split(",") if x.strip()]
        depths = tuple(float(x) for x in getattr(a, "depths", "0.1,0.5,0.9").split(",") if x.strip())
        res = run_passkey(lm, methods, rot, lengths=lengths, depths=depths, trials=getattr(a, "trials", 2))
        res = {"model": lm.model_id, **res}
        print(format_passkey(res))
    else:
        ids = token_ids(lm.tokenizer, load_text(a.data), what=f"evaluation text {a.data!r}")
        res = _eval_table(lm, ids, methods, rot, a.context, a.sequences, a.score_from, peers, a.recent)
        res.update(sink=a.sink, recent=a.recent, data=a.data)
        print(format_table(res, f"{lm.model_id}, context {a.context}, sink {a.sink}, recent {a.recent}"))
        if a.plot:
            plot_error_vs_bits([(f"sink {a.sink} / recent {a.recent}", res)], a.plot)
    if a.json_out:
        write_json(res, a.json_out)
        _log(f"wrote {a.json_out}")
    return 0


# --------------------------------------------------------------------------- run
RUN_METHODS = "bf16,naive,hadamard,kivi,int4,oscar,oscar-plus"
# centering ablation rows (issue 10): the same quantizers without / with centering
RUN_ABLATION = "hadamard+nocenter,int4+nocenter,oscar+center"


def _run_rotations(lm, stats, calib_data: str):
    """The paper's file (oscar), a centered per-layer file (the oscar+center ablation row) and the
    oscar-plus file, all built from ONE pass of calibration statistics."""
    from ..calibrate import build_rotations
    from ..methods import PLUS_KEY_SCALE, PLUS_LEVELS, PLUS_PER_HEAD

    out = {}
    plus = dict(center=True, per_head=PLUS_PER_HEAD, levels=PLUS_LEVELS)
    for key, kw in (("paper", {}), ("centered", dict(center=True)),
                    ("plus", dict(plus, key_scale=PLUS_KEY_SCALE)), ("plus-alt", dict(plus, key_scale=not PLUS_KEY_SCALE))):
        t = time.time()
        rs = build_rotations(stats, model_id=lm.model_id, **kw)
        rs.meta["calib_data"] = calib_data
        _log(f"built the {key} rotations in {time.time() - t:.1f} s")
        out[key] = rs
    return out


def cmd_run(a) -> int:
    """Calibrate on pydoc-calib, evaluate on the disjoint pydoc-eval topics, print tables, JSON, plot."""
    from ..calibrate import collect_stats, quality_warning
    from ..data import builtin_text, token_ids
    from ..eval.report import format_table, plot_error_vs_bits, write_json
    from ..methods import parse_methods

    torch.manual_seed(0)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(a.out_dir) / stamp
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    from ..models import QWEN_ALIASES

    model_name = getattr(a, "model", "default")
    if a.context is None:
        a.context = 2048 if model_name in QWEN_ALIASES else 4096
    lm = _load(model_name)
    ids_cal = token_ids(lm.tokenizer, builtin_text("pydoc-calib"), a.calib_tokens, what="calibration text 'pydoc-calib'")
    t = time.time()
    stats = collect_stats(lm.model, ids_cal, seq_len=min(1024, a.calib_tokens))
    _log(f"calibration statistics from {ids_cal.numel()} tokens of 'pydoc-calib' in {time.time() - t:.1f} s")
    rots = _run_rotations(lm, stats, "pydoc-calib")
    from ..methods import PLUS_KEY_SCALE

    alt = "oscar-plus+nokeyscale" if PLUS_KEY_SCALE else "oscar-plus+keyscale"  # the key-rescale ablation row
    for key, rs in rots.items():
        msg = quality_warning(rs)
        if msg:
            _log(f"WARNING ({ {'paper': 'oscar', 'centered': 'oscar+center', 'plus': 'oscar-plus', 'plus-alt': alt}[key]}): {msg}")
    rot_path = rots["paper"].save(out / "rotations.safetensors")
    rots["centered"].save(out / "rotations-centered.safetensors")
    rots["plus"].save(out / "rotations-plus.safetensors")
    rots["plus-alt"].save(out / "rotations-plus-alt.safetensors")
    _log(f"wrote {rot_path} (+ rotations-centered, rotations-plus)")
    # oscar: the paper's file; oscar+center: centered per-layer; everything else (oscar-plus, and the
    # calibrated means that hadamard / int4 center with) from the oscar-plus file
    rot = {"*": rots["plus"], "oscar": rots["paper"], "oscar+center": rots["centered"], alt: rots["plus-alt"]}
    ids = token_ids(lm.tokenizer, builtin_text("pydoc-eval"), what="evaluation text pydoc-eval")
    peers = () if a.no_peers else ("quanto", "hqq")
    names = RUN_METHODS + ("" if getattr(a, "no_ablation", False) else f",{alt}," + RUN_ABLATION)
    configs = [("default windows", 64, 256)] + ([] if a.no_pure else [("pure INT2", 0, 0)])
    tables, series, reference = [], [], {}
    commit = _git_commit()
    for label, sink, recent in configs:
        _log(f"evaluating ({label}: sink {sink}, recent {recent}, context {a.context})")
        methods = parse_methods(names, sink=sink, recent=recent)
        table_peers = peers if (sink or recent or a.pure_peers) else ()
        res = _eval_table(lm, ids, methods, rot, a.context, 1, 512, table_peers, recent, reference)
        res.update(sink=sink, recent=recent, data="pydoc-eval", calib_data="pydoc-calib",
                   calib_tokens=a.calib_tokens, date=_dt.date.today().isoformat(), commit=commit,
                   page=getattr(methods[-1], "page", 1))
        slug = "results" if sink or recent else "results_pure_int2"
        write_json(res, out / f"{slug}.json")
        title = f"{label} (sink {sink}, recent {recent}), context {a.context}, {res['tokens']} scored tokens"
        tables.append(format_table(res, title))
        series.append((label, res))
    plot = plot_error_vs_bits(series, out / "error_vs_bits.png")
    print()
    print(f"{lm.model_id} — {_dt.date.today().isoformat()}, commit {commit}")
    for t in tables:
        print()
        print(t)
    print()
    print(f"wrote {out}/results.json, {plot} ({time.time() - t0:.0f} s total)")
    return 0


# --------------------------------------------------------------------------- inspect / ablate / bench
def cmd_inspect(a) -> int:
    from ..calibrate.inspect import format_inspect, inspect_rotations
    from ..eval.report import plot_spectra, write_json
    from ..rotation import RotationSet

    rs = RotationSet.load(a.rotations)
    info = inspect_rotations(rs)
    print(format_inspect(info))
    if a.plot:
        plot_spectra(info, a.plot)
        _log(f"wrote {a.plot}")
    if a.json_out:
        write_json(info, a.json_out)
    return 0


def cmd_ablate(a) -> int:
    """a.model, a.what (comma list), a.context, a.calib_tokens, a.out_dir; optional a.calib_sizes (ints)
    for the calib-size ablation. Writes <name>.json/.png per ablation and summary.md under a.out_dir."""
    from ..data import builtin_text, token_ids
    from ..eval.ablate import ABLATIONS, Ablator, run_one
    from ..eval.report import format_ablation, plot_ablation, write_ablation_summary, write_json

    what = [w.strip() for w in a.what.split(",") if w.strip()]
    bad = [w for w in what if w not in ABLATIONS]
    if bad:
        raise ValueError(f"unknown ablation(s) {bad}; choose from {', '.join(ABLATIONS)}")
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lm = _load(a.model)
    sources = ["pydoc-calib"] + (["stdlib-docstrings"] if "calib-domain" in what else [])
    calib = {s: token_ids(lm.tokenizer, builtin_text(s), what=s) for s in sources}
    ev = token_ids(lm.tokenizer, builtin_text("pydoc-eval"), a.context, what="evaluation text pydoc-eval")
    ab = Ablator(lm.model, ev, calib, context=a.context, calib_tokens=a.calib_tokens)
    results = {}
    for name in what:
        _log(f"ablate {name} ...")
        kw = {"sizes": a.calib_sizes} if name == "calib-size" and getattr(a, "calib_sizes", None) else {}
        res = results[name] = {"model": lm.model_id, **run_one(ab, name, **kw)}
        write_json(res, out / f"{name}.json")
        if "skipped" in res:
            _log(f"ablate {name}: skipped ({res['skipped']})")
        else:
            plot_ablation(res, out / f"{name}.png")
            _log(f"ablate {name}: wrote {out / name}.json/.png ({res['seconds']:.0f} s)")
        write_ablation_summary(out, lm.model_id, ABLATIONS)  # after each one: an interrupted run keeps its results
    print("\n".join(format_ablation(r) for r in results.values()))
    return 0


def cmd_bench(a) -> int:
    script = Path(__file__).resolve().parents[3] / "bench" / "bench_decode.py"
    if not script.exists():
        raise FileNotFoundError(f"{script} not found: `oscar-kv bench` runs from a source checkout")
    return subprocess.call([sys.executable, str(script), *[x for x in a.args if x != "--"]])
