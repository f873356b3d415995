"""What 2 bytes of scale + zero per (token, KV head) instead of 4 would cost in accuracy (issue 7, 128K batch 32).

The INT2 record of one token and KV head at head_dim 128 is 32 bytes of codes + 4 of fp16 scale and zero; FlashInfer's
FP8 cache reads 128. At the 128K batch-32 point ours runs at 98-99% of copy bandwidth and 3.97-4.02x FP8 (forty-seventh
session), so a margin over 4x needs fewer bytes: 34 instead of 36 per record is 5.6% fewer. This script measures the
accuracy side only, by simulation (nothing in the package changes): `oscarkv.quant.format.group_scale_zero` is
patched so that scale and zero are rounded to an 8-bit format before the codes are chosen (the codes are then chosen
against the stored values, as the package does for fp16), and `oscar-kv eval` runs on the embedded model.

Schemes (``--schemes``):
  fp16       the package's format (4 bytes)
  bf16       both in bfloat16 (4 bytes; a mantissa-precision reference)
  e4m3       scale and zero each e4m3 after a power-of-two shift per quantize call (2 bytes + one exponent per
             call; the shift stands for a calibrated per-layer exponent)
  e4m3-zq4   scale e4m3 as above, zero an int8 count of quarter steps (z = round(4 m / s) s / 4; 2 bytes)
  e5m2       both e5m2 (2 bytes, no shift)
  e4m3up-zq4 the e4m3 scale rounded up (no value above the top level), zero as e4m3-zq4
  logS-zqN   the scale an 8-bit count of 2**(1/S) steps below the call's largest (S = 32: 8 octaves), zero as zqN
  e4m3-zqN, fp16-zqN, e4m3-fp16z   the zero on a 1/N-step grid (e4m3-zq4 above is N = 4), with an e4m3 or fp16
             scale (3 bytes), or the e4m3 scale with an fp16 zero (3 bytes): which rounding costs what

Usage: python bench/acc2/scale_bytes_exp.py --rotations R.safetensors --plus-rotations P.safetensors --out DIR
       [--windows 0,0] [--context 4096] [--model qwen2.5-coder-1.5b] [--methods oscar-plus] [--schemes fp16,e4m3-zq4]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

import oscarkv.quant.format as fmt
from oscarkv.cli.main import main as cli_main

ORIG = fmt.group_scale_zero


def shift_exp(v: torch.Tensor, fmax: float) -> torch.Tensor:
    """The power-of-two exponent that puts max |v| just under a format's largest value ``fmax`` (one per call)."""
    return torch.floor(torch.log2(fmax / v.abs().amax().clamp_min(1e-30)))


def shifted(v: torch.Tensor, dtype: torch.dtype, fmax: float) -> torch.Tensor:
    """v rounded to ``dtype`` after the call's power-of-two shift."""
    e = shift_exp(v, fmax)
    return (v * 2.0**e).to(dtype).float() / 2.0**e


E4M3 = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
E4M3 = E4M3[torch.isfinite(E4M3) & (E4M3 >= 0)].unique()  # the non-negative e4m3 values, sorted


def e4m3_up(v: torch.Tensor) -> torch.Tensor:
    """v (> 0) rounded up to e4m3 after the call's shift: no value of the group falls above the top level."""
    e = shift_exp(v, 448.0)
    i = torch.searchsorted(E4M3, (v * 2.0**e).contiguous()).clamp(max=len(E4M3) - 1)
    return E4M3[i] / 2.0**e


def log_scale(v: torch.Tensor, steps: int) -> torch.Tensor:
    """v (> 0) as a uint8 step count of 2**(1/steps) below the call's largest value (256 steps: 256 / steps
    octaves), rounded to nearest."""
    top = torch.log2(v.amax().clamp_min(1e-30))
    k = torch.round((top - torch.log2(v.clamp_min(1e-30))) * steps).clamp(0, 255)
    return 2.0 ** (top - k / steps)


# one rounding per format name; a scheme is "<scale format>[-<zero format>]" (the zero takes the scale's format when
# not named; "fp16z" names an fp16 zero), the zero formats adding "zqN": an int8 count of 1/N steps of the rounded scale
FORMATS = {
    "fp16": lambda v: v.half().float(),
    "bf16": lambda v: v.bfloat16().float(),
    "e4m3": lambda v: shifted(v, torch.float8_e4m3fn, 448.0),
    "e4m3up": e4m3_up,
    "e5m2": lambda v: v.to(torch.float8_e5m2).float(),
}


def scheme_parts(name: str) -> tuple[str, str]:
    """(scale format, zero format) of a scheme name, checked: a bad name stops before any model is loaded."""
    scale, _, zero = name.partition("-")
    zero = zero.removesuffix("z") if zero else scale
    ok_scale = scale in FORMATS or (scale.startswith("log") and scale[3:].isdigit() and int(scale[3:]) > 0)
    ok_zero = (zero in FORMATS and zero != "e4m3up") or (zero.startswith("zq") and zero[2:].isdigit()
                                                          and int(zero[2:]) > 0)
    if not (ok_scale and ok_zero):
        raise SystemExit(f"unknown scheme {name!r} (e.g. fp16, e4m3, e4m3-zq4, log32-zq4, e4m3-fp16z)")
    return scale, zero


def scheme_fn(name: str):
    scale_fmt, zero_fmt = scheme_parts(name)

    def patched(x, cfg):
        xg, scale, zero = ORIG(x, cfg.__class__(cfg.bits, cfg.group_size, cfg.clip_ratio, "float32", cfg.levels))
        s, z = scale.float(), zero.float()
        s = log_scale(s, int(scale_fmt[3:])) if scale_fmt.startswith("log") else FORMATS[scale_fmt](s)
        if zero_fmt.startswith("zq"):
            n = int(zero_fmt[2:])
            z = torch.round(n * z / s).clamp(-128, 127) * s / n
        else:
            z = FORMATS[zero_fmt](z)
        return xg, s, z
    return patched


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rotations", required=True)
    ap.add_argument("--plus-rotations", required=True)
    ap.add_argument("--schemes", default="fp16,bf16,e4m3,e4m3-zq4,e5m2")
    ap.add_argument("--methods", default="oscar,oscar-plus")
    ap.add_argument("--context", default="4096")
    ap.add_argument("--model", default="default")
    ap.add_argument("--windows", default="64,256", help="sink,recent BF16 tokens (0,0: pure INT2)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sink, recent = a.windows.split(",")
    schemes = a.schemes.split(",")
    for name in schemes:
        if name != "fp16":
            scheme_parts(name)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for name in schemes:
        fmt.group_scale_zero = ORIG if name == "fp16" else scheme_fn(name)
        js = out / f"eval_{name}.json"
        rc = cli_main(["eval", "--model", a.model, "--rotations", a.rotations, "--plus-rotations", a.plus_rotations,
                       "--methods", "bf16," + a.methods, "--context", a.context, "--sink", sink, "--recent", recent,
                       "--json", str(js)])
        if rc:
            sys.exit(rc)
        rows[name] = json.loads(js.read_text())
        print(f"== {name} done", flush=True)
    fmt.group_scale_zero = ORIG
    (out / "summary.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
