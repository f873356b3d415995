"""Implementations of the `oscar-kv` sub-commands (argparse namespaces in, exit codes out)."""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
from ..errors import InputError, NotFoundError
from ..fileio import check_distinct_paths, check_input_file, check_output_dir, check_output_path, source_commit
from ..models import resolve_model_path as resolve_model


def _log(msg: str) -> None:
    print(f"[oscar-kv] {msg}", file=sys.stderr, flush=True)


def _load(model: str):
    from ..models import load_model

    t = time.time()
    lm = load_model(model)
    _log(f"loaded {lm.model_id} in {time.time() - t:.1f} s")
    return lm


# --------------------------------------------------------------------------- checks before the work
# Everything a command can refuse is refused here, before the model is loaded or anything is computed.
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def _read_data(source: str, what: str = "--data") -> str:
    """The text of ``source`` (a built-in source or a file), read once before the model loads: a missing,
    empty or non-UTF-8 file is refused now, not after the load."""
    from ..data import SOURCES, load_text

    if source not in SOURCES:
        check_input_file(source, f"{what}", hint=f"pass a UTF-8 text file or one of the built-in sources {', '.join(SOURCES)}")
    return load_text(source)


def _check_positions(config, *lengths: int, what: str = "--context") -> None:
    """Warn (not refuse: RoPE scaling may allow it) when a length is past the model's trained positions."""
    from ..dims import text_config

    mpe = getattr(text_config(config), "max_position_embeddings", None)
    longest = max(lengths, default=0)
    if mpe and longest > mpe:
        _log(f"warning: {what} {longest} is past the model's max_position_embeddings ({mpe}); "
             "results past that length are extrapolation")


def _peek_config(model: str):
    """The model's config alone (fast), so shape-dependent arguments are checked before the weights load."""
    from transformers import AutoConfig

    path, _ = resolve_model(model)
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise InputError(f"cannot read the model config in {path}: {type(e).__name__}: {first}") from e


def _peek_tokenizer(model: str):
    """The model's tokenizer alone (the same files ``load_model`` reads; fast next to the weights), so the
    texts are tokenized and their token counts checked before the weights load; the command keeps the ids."""
    import warnings

    from transformers import AutoTokenizer

    path, _ = resolve_model(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return AutoTokenizer.from_pretrained(path)
        except Exception as e:  # noqa: BLE001 (tokenizers, json, sentencepiece... each raise their own types)
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            raise InputError(f"cannot load the tokenizer from {path}: {type(e).__name__}: {first}") from e


def _check_calib_tokens(config, tokens: int) -> None:
    """Enough calibration tokens for this model's head_dim (``calibrate.check_calibration_tokens``)."""
    from ..calibrate.core import check_calibration_tokens
    from ..dims import attention_dims

    check_calibration_tokens(tokens, attention_dims(config).head_dim)


def _check_group_size(config, group_size: int, methods=()) -> None:
    from ..rotation import config_fingerprint

    d = config_fingerprint(config)["head_dim"]
    g = min(group_size, d)
    token_wise = [m for m in methods if m.quantized and not m.per_channel_keys] if methods else [None]
    if token_wise and d % g:
        divisors = [x for x in (16, 32, 64, 128, 256) if x <= d and d % x == 0]
        raise InputError(f"--group-size {group_size} does not divide the model's head_dim {d}; use one of {divisors}")


def _check_methods(config, methods, rotations) -> None:
    """Each method can be built with the rotation file it will get (``harness.check_methods``)."""
    from ..dims import attention_dims
    from ..eval.harness import check_methods

    check_methods(methods, rotations, attention_dims(config).head_dim)


def _load_rotations_file(path: str, what: str = "--rotations"):
    """Read and validate a rotation file before the model is loaded (model check comes later)."""
    from ..rotation import RotationSet

    check_input_file(path, what, hint="create it with `oscar-kv calibrate --out ROT.safetensors`")
    return RotationSet.load(path)


def _calibration_ids(model: str, data: str, text: str, tokens: int):
    """The first ``tokens`` tokens of ``text`` (from ``data``; refused when it has fewer), before the model loads."""
    from ..data import token_ids

    return token_ids(_peek_tokenizer(model), text, tokens, what=f"calibration text {data!r}")


def _calibrate(lm, ids, data: str, seq_len: int = 1024, **kw):
    from ..calibrate import calibrate

    t = time.time()
    rs = calibrate(lm.model, ids, seq_len=min(seq_len, ids.numel()), model_id=lm.model_id, **kw)
    rs.meta["calib_data"] = data
    _log(f"calibrated on {ids.numel()} tokens of {data!r} in {time.time() - t:.1f} s")
    return rs


# --------------------------------------------------------------------------- calibrate
def cmd_calibrate(a) -> int:
    from ..rotation import COMPOSITIONS
    from ..methods import PLUS_KEY_SCALE, PLUS_LEVELS, PLUS_PER_HEAD

    out = Path(a.out)
    if out.suffix != ".safetensors":
        raise InputError(f"--out {out} should end in .safetensors (the rotation file format)")
    check_output_path(out, "--out")
    check_distinct_paths({"--out": out}, {"--data": a.data})
    text = _read_data(a.data)
    if a.composition not in COMPOSITIONS:
        raise InputError(f"--composition {a.composition!r} is unknown; choose from {', '.join(COMPOSITIONS)}")
    config = _peek_config(a.model)
    _check_group_size(config, a.group_size)
    _check_calib_tokens(config, a.tokens)
    ids = _calibration_ids(a.model, a.data, text, a.tokens)
    lm = _load(a.model)
    plus = getattr(a, "plus", False)
    rs = _calibrate(lm, ids, a.data, a.seq_len, composition=a.composition, group_size=a.group_size,
                    fit_clip=not a.no_fit_clip, per_head=a.per_head or (plus and PLUS_PER_HEAD),
                    levels=PLUS_LEVELS if plus and a.levels == "uniform" else a.levels,
                    center=getattr(a, "center", False) or plus,
                    key_scale=PLUS_KEY_SCALE if getattr(a, "key_scale", None) is None and plus
                    else bool(getattr(a, "key_scale", None)),
                    key_weighting=getattr(a, "key_weighting", "uniform"))
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
    from ..data import token_ids
    from ..eval.report import format_table, plot_error_vs_bits, write_json
    from ..methods import parse_methods

    from ..eval.harness import PEERS
    from .main import EVAL_TASK_DEFAULTS

    for task, flags in EVAL_TASK_DEFAULTS.items():  # a flag of the other task is refused, not ignored
        for name, default in flags.items():
            if getattr(a, name, None) is None:
                setattr(a, name, default)
            elif task != a.task:
                raise InputError(f"--{name.replace('_', '-')} applies to --task {task} only, not to --task {a.task}")
    methods = parse_methods(a.methods, sink=a.sink, recent=a.recent, group_size=a.group_size, levels=a.levels,
                            scale_dtype=a.scale_dtype)
    # oscar-plus reads --plus-rotations when given (its default is --rotations); the others need --rotations
    plus_given = bool(getattr(a, "plus_rotations", None))
    needs_rot = [m.name for m in methods if m.rotation == "calibrated"
                 and not (plus_given and m.name.split("+")[0] == "oscar-plus")]
    if needs_rot and not a.rotations:
        raise InputError(f"method {needs_rot[0]} needs --rotations ROT.safetensors (make one with `oscar-kv calibrate`"
                         f"{' --plus' if needs_rot[0].startswith('oscar-plus') else ''})")
    peers = tuple(p.strip() for p in a.peers.split(",") if p.strip())
    bad = [p for p in peers if p not in PEERS]
    if bad:
        raise InputError(f"--peers {','.join(bad)}: unknown; choose from {', '.join(PEERS)}")
    if a.task == "ppl" and "bf16" not in [m.name for m in methods]:
        raise InputError("--methods must include bf16 (the reference for KL and top-1), e.g. --methods bf16,oscar")
    if a.task == "ppl" and not a.score_from < a.context - 1:
        raise InputError(f"--score-from {a.score_from} must be below --context - 1 = {a.context - 1}")
    if a.json_out:
        check_output_path(a.json_out, "--json")
    if a.plot:
        check_output_path(a.plot, "--plot", suffix=PLOT_SUFFIXES)
    check_distinct_paths({"--json": a.json_out, "--plot": a.plot},
                         {"--rotations": a.rotations, "--plus-rotations": getattr(a, "plus_rotations", None),
                          "--data": a.data})
    if a.task == "passkey":  # the passkey table has no error-vs-bits plot and no peer rows: refused, not ignored
        for flag, given in (("--plot", a.plot), ("--peers", peers)):
            if given:
                raise InputError(f"{flag} applies to --task ppl only, not to --task passkey")
    text = _read_data(a.data)  # ppl: the scored text; passkey: the haystack
    rot = _load_rotations_file(a.rotations) if a.rotations else None
    plus_path = getattr(a, "plus_rotations", None)
    plus = _load_rotations_file(plus_path, "--plus-rotations") if plus_path else None
    config = _peek_config(a.model)
    for r in (rot, plus):
        if r is not None:
            r.check_model(config)
    _check_group_size(config, a.group_size, methods)
    if plus is not None:
        rot = {"*": plus, **({"oscar": rot} if rot is not None else {})}
    _check_methods(config, methods, rot)
    _check_positions(config, *(a.lengths if a.task == "passkey" else [a.context]),
                     what="--lengths" if a.task == "passkey" else "--context")
    if a.task == "ppl":  # enough text for --sequences x --context: refused now, not after the load
        from ..eval.harness import windows

        ids = token_ids(_peek_tokenizer(a.model), text, what=f"evaluation text {a.data!r}")
        windows(ids, a.context, a.sequences)
    else:  # every prompt fits its length and the haystack: refused now, not after the load
        from ..eval.passkey import make_prompts

        prompts = make_prompts(_peek_tokenizer(a.model), text, a.lengths, tuple(a.depths), a.trials)
    lm = _load(a.model)
    if a.task == "passkey":
        from ..eval.passkey import run_passkey, format_passkey

        res = run_passkey(lm, methods, rot, lengths=a.lengths, depths=tuple(a.depths), trials=a.trials,
                          haystack=text, prompts=prompts)
        res = {"model": lm.model_id, **res}
        print(format_passkey(res))
    else:
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
RUN_METHODS = "bf16,naive,hadamard,kivi,int4,oscar,oscar+log8,oscar-plus"
# (oscar+log8: the paper's method with scale and zero in one byte each, the format of issue 7's 4x FP8 at 128K b32)
# centering ablation rows (issue 10): the same quantizers without / with centering
# (oscar+center, the paper's per-layer rotation centered = oscar-plus without its per-KV-head rotations, is
# available as `--methods oscar+center`; not in the default rows, to keep `make run`'s time)
RUN_ABLATION = "hadamard+nocenter,int4+nocenter"


def _run_rotations(lm, stats, calib_data: str):
    """The paper's file (oscar), a centered per-layer file (the oscar+center ablation row) and the
    oscar-plus file, all built from ONE pass of calibration statistics."""
    from ..calibrate import build_rotations
    from ..methods import PLUS_KEY_SCALE, PLUS_LEVELS, PLUS_PER_HEAD

    out, built = {}, {}
    plus = {"center": True, **({"per_head": True} if PLUS_PER_HEAD else {}), **({"levels": PLUS_LEVELS} if PLUS_LEVELS != "uniform" else {})}
    for key, kw in (("paper", {}), ("centered", dict(center=True)),
                    ("plus", {**plus, **({"key_scale": True} if PLUS_KEY_SCALE else {})}),
                    ("plus-alt", {**plus, **({} if PLUS_KEY_SCALE else {"key_scale": True})})):
        same = next((out[k] for k, k_kw in built.items() if k_kw == kw), None)
        if same is not None:  # e.g. oscar-plus's file is the centered one: build once
            out[key] = same
            continue
        built[key] = kw
        t = time.time()
        rs = build_rotations(stats, model_id=lm.model_id, **kw)
        rs.meta["calib_data"] = calib_data
        _log(f"built the {key} rotations in {time.time() - t:.1f} s")
        out[key] = rs
    return out


def _run_rotation_map(rots: dict, alt: str) -> dict:
    """Which of run's files each method reads (``harness.rotations_for``: by label, then base name, then "*"):
    oscar (and oscar+log8...) the paper's file; oscar+center the centered per-layer one; everything else
    (oscar-plus, and the calibrated means that hadamard / int4 center with) the oscar-plus file."""
    return {"*": rots["plus"], "oscar": rots["paper"], "oscar+center": rots["centered"], alt: rots["plus-alt"]}


def cmd_run(a) -> int:
    """Calibrate on pydoc-calib, evaluate on the disjoint pydoc-eval topics, print tables, JSON, plot."""
    from ..calibrate import collect_stats, quality_warning
    from ..data import builtin_text, token_ids
    from ..eval.report import format_table, plot_error_vs_bits, write_json
    from ..eval.harness import windows
    from ..methods import PLUS_KEY_SCALE, parse_methods

    from ..models import QWEN_ALIASES

    model_name = getattr(a, "model", "default")
    if a.context is None:
        a.context = 2048 if model_name in QWEN_ALIASES else 4096
    if a.context < 514:
        raise InputError(f"--context {a.context} is too short: `run` scores positions 512 and later, use >= 514")
    if getattr(a, "only_pure", False) and a.no_pure:
        raise InputError("--only-pure and --no-pure leave no table to compute; pass one of them")
    check_output_dir(a.out_dir, "--out-dir")
    config = _peek_config(model_name)
    _check_positions(config, a.context)
    if not getattr(a, "reuse_rotations", None):
        _check_calib_tokens(config, a.calib_tokens)
    alt = "oscar-plus+nokeyscale" if PLUS_KEY_SCALE else "oscar-plus+keyscale"  # the key-rescale ablation row
    names = RUN_METHODS + ("" if getattr(a, "no_ablation", False) else f",{alt}," + RUN_ABLATION)
    if getattr(a, "methods", None):  # a subset (the machine is slow): bf16 is always the reference
        names = ",".join(dict.fromkeys(["bf16", *[m.strip() for m in a.methods.split(",") if m.strip()]]))
    listed = parse_methods(names)  # unknown names refused now, not after the calibration
    reuse = getattr(a, "reuse_rotations", None)
    files = {"paper": "rotations", "centered": "rotations-centered", "plus": "rotations-plus", "plus-alt": "rotations-plus-alt"}
    if reuse:  # read and checked against the model before it loads
        from ..rotation import RotationSet

        hint = "pass the output folder of an earlier `oscar-kv run` of this model (RUN_DIR/rotations*.safetensors)"
        if not Path(reuse).is_dir():
            raise NotFoundError(f"--reuse-rotations {reuse} is not a folder; {hint}")
        rots = {k: RotationSet.load(check_input_file(Path(reuse) / f"{f}.safetensors", "--reuse-rotations file", hint=hint))
                for k, f in files.items()}
        for r in rots.values():
            r.check_model(config)
        a.calib_tokens = int(rots["paper"].meta.get("calib_tokens", a.calib_tokens))
        from ..methods import PLUS_LEVELS, PLUS_PER_HEAD

        def recipe(rs, ks):  # does this file match oscar-plus's current recipe (with key rescale ks)?
            m = rs.meta
            return (bool(m.get("centered")), bool(m.get("per_head")), m.get("levels", "uniform"),
                    bool(m.get("key_scale"))) == (True, PLUS_PER_HEAD, PLUS_LEVELS, ks)

        # files written while oscar-plus had another definition: take the one matching today's recipe
        for key, ks in (("plus", PLUS_KEY_SCALE), ("plus-alt", not PLUS_KEY_SCALE)):
            match = next((r for r in rots.values() if recipe(r, ks)), None)
            if match is not None:
                rots[key] = match
        # every method buildable with the file it will get (e.g. +log8 needs the scale tops, which files written
        # before the forty-eighth session lack)
        _check_methods(config, listed, _run_rotation_map(rots, alt))
    tok = _peek_tokenizer(model_name)  # both texts tokenized (and long enough) before the load
    ids = token_ids(tok, builtin_text("pydoc-eval"), what="evaluation text pydoc-eval")
    windows(ids, a.context, 1)
    ids_cal = None if reuse else token_ids(tok, builtin_text("pydoc-calib"), a.calib_tokens,
                                           what="calibration text 'pydoc-calib'")
    torch.manual_seed(0)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(a.out_dir) / stamp  # made at the first file written: a failed load leaves no empty folder
    t0 = time.time()
    lm = _load(model_name)

    if reuse:  # the four rotation files of an earlier `oscar-kv run` (same model): skip calibration
        _log(f"reusing the rotation files of {reuse} ({a.calib_tokens} calibration tokens)")
    else:
        t = time.time()
        stats = collect_stats(lm.model, ids_cal, seq_len=min(1024, a.calib_tokens))
        _log(f"calibration statistics from {ids_cal.numel()} tokens of 'pydoc-calib' in {time.time() - t:.1f} s")
        rots = _run_rotations(lm, stats, "pydoc-calib")

    for key, rs in rots.items():
        msg = quality_warning(rs)
        if msg:
            _log(f"WARNING ({ {'paper': 'oscar', 'centered': 'oscar+center', 'plus': 'oscar-plus', 'plus-alt': alt}[key]}): {msg}")
    out.mkdir(parents=True, exist_ok=True)
    rot_path = rots["paper"].save(out / "rotations.safetensors")
    rots["centered"].save(out / "rotations-centered.safetensors")
    rots["plus"].save(out / "rotations-plus.safetensors")
    rots["plus-alt"].save(out / "rotations-plus-alt.safetensors")
    _log(f"wrote {rot_path} (+ rotations-centered, rotations-plus)")
    rot = _run_rotation_map(rots, alt)
    peers = () if a.no_peers else ("quanto", "hqq")
    # pure INT2 = no BF16 window at all: sink 0, recent 0 and demotion page 1 (a page of 16 would keep
    # the last 0-15 tokens in BF16)
    configs = [("default windows", 64, 256, 16)] + ([] if a.no_pure else [("pure INT2", 0, 0, 1)])
    if getattr(a, "only_pure", False):
        configs = [c for c in configs if c[0] == "pure INT2"]
    tables, series, reference = [], [], {}
    commit = source_commit()
    for label, sink, recent, page in configs:
        _log(f"evaluating ({label}: sink {sink}, recent {recent}, page {page}, context {a.context})")
        methods = parse_methods(names, sink=sink, recent=recent, page=page)
        by_name = {m.name: m for m in methods}
        if not (sink or recent) and "kivi" in by_name and "oscar-plus" in by_name:
            # KIVI keeps its incomplete key block in full precision (counted in its bits); the same bits
            # spent on a BF16 window by oscar-plus is the comparison at equal bits (docs/ACCURACY.md)
            from ..dims import attention_dims

            d = attention_dims(lm.model).head_dim
            methods.append(by_name["oscar-plus"].at_bits(by_name["kivi"].bits_per_element(a.context, d), a.context, d))
        table_peers = peers if (sink or recent or a.pure_peers) else ()
        res = _eval_table(lm, ids, methods, rot, a.context, 1, 512, table_peers, recent, reference)
        res.update(sink=sink, recent=recent, data="pydoc-eval", calib_data="pydoc-calib",
                   calib_tokens=a.calib_tokens, date=_dt.date.today().isoformat(), commit=commit,
                   page=page)
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

    if a.plot:
        check_output_path(a.plot, "--plot", suffix=PLOT_SUFFIXES)
    if a.json_out:
        check_output_path(a.json_out, "--json")
    check_distinct_paths({"--json": a.json_out, "--plot": a.plot}, {"the rotation file": a.rotations})
    check_input_file(a.rotations, "rotation file", hint="create it with `oscar-kv calibrate --out ROT.safetensors`")
    rs = RotationSet.load(a.rotations)  # validated: shapes and counts consistent, finite, orthogonal
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
    if bad or not what:
        raise InputError(f"--what {a.what!r}: unknown ablation(s) {bad}; choose from {', '.join(ABLATIONS)}")
    Ablator.default_score_from(a.context)  # a context with nothing to score: refused before the load
    check_output_dir(a.out_dir, "--out-dir")
    config = _peek_config(a.model)
    _check_positions(config, a.context)
    _check_calib_tokens(config, a.calib_tokens)
    tok = _peek_tokenizer(a.model)  # the texts tokenized (and long enough) before the load
    sources = ["pydoc-calib"] + (["stdlib-docstrings"] if "calib-domain" in what else [])
    calib = {s: token_ids(tok, builtin_text(s), what=s) for s in sources}
    ev = token_ids(tok, builtin_text("pydoc-eval"), a.context, what="evaluation text pydoc-eval")
    Ablator.check_calib(calib, a.calib_tokens)
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lm = _load(a.model)
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
        raise NotFoundError(f"{script} not found: `oscar-kv bench` runs from a source checkout")
    args = [x for x in a.args if x != "--"]
    if not args and not torch.cuda.is_available():  # with arguments, the script itself refuses a CPU-only machine
        print("no CUDA GPU: the small CPU run of the benchmark script (--smoke: the torch / Triton paths on tiny "
              "shapes, no timings that mean anything)", file=sys.stderr)
        args = ["--smoke"]
    return subprocess.call([sys.executable, str(script), *args])
