"""Tables, JSON and plots for evaluation results."""

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


def write_json(obj: dict, path: str | os.PathLike) -> Path:
    """Atomic JSON write (temp file + rename; see ``oscarkv.fileio.atomic_write``)."""
    from ..fileio import atomic_write

    text = json.dumps(obj, indent=2) + "\n"  # serialise first: a bad object never touches the disk

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)

    path = atomic_write(path, write)
    return path


def plot_error_vs_bits(results: list[tuple[str, dict]], path: str | os.PathLike, metric: str = "kl") -> Path:
    """One point per method: ``metric`` (KL to BF16 by default, log scale) against bits per element.
    ``results`` is a list of (series label, evaluate() result) — e.g. windows vs pure INT2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
