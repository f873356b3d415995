"""Every table, JSON file and plot of the package's results, in one place.

Tables: ``format_table`` (one ``evaluate`` result), ``format_ablation`` (one ablation).
Files:  ``write_json`` (atomic), ``write_ablation_summary`` (summary.md of an ablation run).
Plots:  ``plot_error_vs_bits`` (methods), ``plot_ablation`` (one ablation), ``plot_spectra`` (a rotation
        file's ``calibrate.inspect_rotations`` diagnostics).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def format_table(result: dict, title: str | None = None) -> str:
    """A fixed-width table (also valid Markdown) of one ``evaluate`` result."""
    rows = result["results"]
    ref = next((r for r in rows if r["method"] == "bf16"), None)
    head = "| method | bits/elem | KV MiB | ppl | Δppl vs bf16 | KL vs bf16 | top-1 agree |"
    sep = "|---|---:|---:|---:|---:|---:|---:|"
    lines = []
    if title:
        lines.append(title)
        lines.append("")
    lines += [head, sep]
    for r in rows:
        dppl = f"{100 * (r['ppl'] / ref['ppl'] - 1):+.1f}%" if ref else "n/a"
        lines.append(
            f"| {r['method']} | {r['bits_per_element']:.2f} | {r['kv_bytes'] / 2**20:.1f} | {r['ppl']:.3f} | "
            f"{dppl} | {r['kl']:.4f} | {100 * r['top1']:.1f}% |"
        )
    return "\n".join(lines)


def format_ablation(res: dict) -> str:
    if "skipped" in res:
        return f"### {res['name']}\n\nskipped: {res['skipped']}\n"
    bf16 = res.get("bf16_ppl")
    out = [f"### {res['name']}", "", f"{res.get('setting', '')}; context {res.get('context')}, "
           f"{res.get('scored_tokens')} scored tokens, BF16 ppl {bf16:.3f}", "",
           "| variant | bits/elem | ppl | Δppl vs bf16 | KL vs bf16 | top-1 agree |", "|---|---:|---:|---:|---:|---:|"]
    multi = len({r["series"] for r in res["rows"]}) > 1
    for r in res["rows"]:
        label = r["variant"] + (f" [{r['series']}]" if multi and r["series"] not in r["variant"] else "")
        out.append(f"| {label} | {r['bits_per_element']:.2f} | {r['ppl']:.3f} | "
                   f"{100 * (r['ppl'] / bf16 - 1):+.1f}% | {r['kl']:.4f} | {100 * r['top1']:.1f}% |")
    out += [""] + [f"- {n}" for n in res.get("notes", [])] + [""]
    return "\n".join(out)


def write_json(obj: dict, path: str | os.PathLike) -> Path:
    """Atomic JSON write (temp file + rename; see ``oscarkv.fileio.atomic_write``)."""
    from ..fileio import atomic_write

    text = json.dumps(obj, indent=2) + "\n"  # serialise first: a bad object never touches the disk

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)

    path = atomic_write(path, write)
    return path


def write_ablation_summary(out: Path, model_id: str, names) -> Path:
    """summary.md from every <name>.json in ``out``, in the order of ``names`` (so a re-run of some
    ablations keeps the others)."""
    from ..fileio import atomic_write

    found = [json.loads((out / f"{n}.json").read_text()) for n in names if (out / f"{n}.json").exists()]
    text = "\n".join([f"# Ablations — {model_id}", ""] + [format_ablation(r) for r in found])
    return atomic_write(out / "summary.md", lambda tmp: Path(tmp).write_text(text))


# ---------------------------------------------------------------- plots
def _pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path, dpi: int) -> Path:
    """Written whole (``fileio.atomic_write``): a failed or interrupted save keeps the previous file. The
    format comes from the target's suffix (the temporary file's is .tmp)."""
    import matplotlib.pyplot as plt

    from ..fileio import atomic_write

    path = Path(path)
    fmt = path.suffix[1:].lower() or "png"
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=fmt))
    finally:
        plt.close(fig)


def plot_error_vs_bits(results: list[tuple[str, dict]], path: str | os.PathLike, metric: str = "kl") -> Path:
    """One point per method: ``metric`` (KL to BF16 by default, log scale) against bits per element.
    ``results`` is a list of (series label, evaluate() result) — e.g. windows vs pure INT2."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5))
    markers = "osD^v"
    for i, (label, res) in enumerate(results):
        pts = [r for r in res["results"] if r["method"] != "bf16"]
        xs = [r["bits_per_element"] for r in pts]
        ys = [max(r[metric], 1e-6) for r in pts]
        ax.scatter(xs, ys, marker=markers[i % len(markers)], s=60, label=label, zorder=3)
        for r, x, y in zip(pts, xs, ys):
            ax.annotate(r["method"], (x, y), textcoords="offset points", xytext=(6, 4), fontsize=9)
    ax.set_yscale("log")
    ax.set_xlabel("effective bits per KV element (scale/zero and BF16 windows included)")
    ax.set_ylabel({"kl": "KL(BF16 ‖ method) per token, nats", "ppl": "perplexity"}.get(metric, metric))
    ctx = results[0][1].get("context")
    ax.set_title(f"{results[0][1].get('model', '')}\nerror vs bits at context {ctx} (lower-left is better)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return _save(fig, path, dpi=120)


def plot_ablation(res: dict, path) -> Path:
    """Line chart (windows, calib-size: KL against the varied size) or horizontal bars of KL to BF16
    (log scale) with ppl written on each bar."""
    plt = _pyplot()
    rows = res["rows"]
    bf16 = res.get("bf16_ppl")
    lines = res["name"] in ("windows", "calib-size")
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.42 * len(rows)) if not lines else (7.5, 4.8))
    series = list(dict.fromkeys(r["series"] for r in rows))
    colors = {s: f"C{i}" for i, s in enumerate(series)}
    if lines:
        for s in series:
            pts = [r for r in rows if r["series"] == s and "x" in r]
            if pts:
                ax.plot([r["x"] for r in pts], [max(r["kl"], 1e-6) for r in pts], "o-", color=colors[s], label=s)
            else:  # a flat reference line (hadamard in calib-size)
                ax.axhline(next(r for r in rows if r["series"] == s)["kl"], color=colors[s], ls="--", label=s)
        xs = sorted({r["x"] for r in rows if "x" in r})
        ax.set_xscale("symlog", linthresh=max(1, min([x for x in xs if x > 0], default=1)))
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel({"windows": "window size (tokens)", "calib-size": "calibration tokens"}[res["name"]])
        ax.set_ylabel("KL(BF16 ‖ method) per token, nats")
        kls = [r["kl"] for r in rows]
        if max(kls) > 3 * max(min(kls), 1e-6):
            ax.set_yscale("log")
        else:  # a narrow range: a linear axis from 0 shows how flat it is
            ax.set_ylim(0, max(kls) * 1.15)
        ax.legend(fontsize=8)
    else:
        y = list(range(len(rows)))[::-1]
        kls = [max(r["kl"], 1e-6) for r in rows]
        ax.barh(y, kls, color=[colors[r["series"]] for r in rows])
        ax.set_yticks(y, [r["variant"] + ("" if len(series) == 1 or r["series"] in r["variant"] else f" [{r['series']}]")
                          for r in rows], fontsize=8)
        for yi, r, k in zip(y, rows, kls):
            ax.text(k, yi, f"  KL {r['kl']:.3f} · ppl {r['ppl']:.2f}", va="center", fontsize=7)
        ax.set_xscale("log")
        ax.set_xlim(min(kls) / 1.5, max(kls) * 3)  # room for the labels
        ax.set_xlabel("KL(BF16 ‖ method) per token, nats (log; lower is better)")
    ax.grid(True, which="both", axis="x" if not lines else "both", alpha=0.3)
    title = f"ablation: {res['name']} — {res.get('setting', '')}"
    if bf16:
        title += f"\ncontext {res.get('context')}, BF16 ppl {bf16:.2f}"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return _save(fig, path, dpi=110)


def _mean_over_rotations(info: dict, kind: str, fn) -> list[float | None]:
    out = []
    for entry in info["layers"]:
        vals = [fn(r) for r in entry[kind]["rotations"] if r.get("eigenvalues") is not None]
        out.append(sum(vals) / len(vals) if vals else None)
    return out


def plot_spectra(info: dict, path) -> str:
    """2x2 PNG: normalised K and V spectra per layer, top-n variance fractions, clip ratios."""
    import torch

    from ..calibrate.inspect import TOP

    plt = _pyplot()
    n = info["num_layers"]
    cmap = plt.get_cmap("viridis")
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    for ax, kind, title in ((axes[0, 0], "k", "Sigma_K (query covariance)"), (axes[0, 1], "v", "Sigma_V (score-weighted)")):
        drawn = False
        for entry in info["layers"]:
            for r in entry[kind]["rotations"]:
                if r.get("eigenvalues") is None:
                    continue
                lam = torch.tensor(r["eigenvalues"])
                ax.semilogy(range(1, lam.numel() + 1), (lam / lam[0]).clamp_min(1e-8).tolist(),
                            color=cmap(entry["layer"] / max(n - 1, 1)), lw=0.8, alpha=0.8)
                drawn = True
        ax.set(title=f"{title}: eigenvalues / largest", xlabel="rank", ylabel="relative eigenvalue")
        if not drawn:
            ax.text(0.5, 0.5, "no eigenvalues stored", ha="center", transform=ax.transAxes)
        ax.grid(alpha=0.3)
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, max(n - 1, 1)))
    fig.colorbar(sm, ax=axes[0, :], label="layer", shrink=0.8)

    ax = axes[1, 0]
    for kind, style in (("k", "-"), ("v", "--")):
        for top, color in zip(TOP, ("C0", "C1", "C2")):
            ys = _mean_over_rotations(info, kind, lambda r, t=str(top): r["top_fraction"].get(t, float("nan")))
            ax.plot(range(n), [float("nan") if y is None else y for y in ys], style, color=color,
                    label=f"{kind.upper()} top-{top}")
    ax.set(title="share of variance in the top eigen-directions", xlabel="layer", ylabel="fraction", ylim=(0, 1))
    ax.legend(ncol=2, fontsize=8)
    ax.grid(alpha=0.3)

    ax = axes[1, 1]
    for kind, marker in (("k", "o"), ("v", "s")):
        ys = [e[kind]["clip"] for e in info["layers"]]
        ax.plot(range(n), [1.0 if y is None else y for y in ys], marker=marker, ms=3, label=f"{kind.upper()} clip ratio")
    ax.set(title="fitted clip ratio rho (1.0 = no clipping)", xlabel="layer", ylabel="rho", ylim=(0.75, 1.02))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    meta = info.get("meta", {})
    fig.suptitle(f"{meta.get('model_id', '?')} - {meta.get('composition', '?')}, {meta.get('calib_tokens', '?')} calibration tokens")
    return str(_save(fig, path, dpi=120))
