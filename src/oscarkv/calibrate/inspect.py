"""Diagnostics of a RotationSet: spectra of Sigma_K / Sigma_V, variance concentration, how the
rotation spreads variance over quantization groups, fitted clip ratios and levels.

``inspect_rotations(rs) -> dict`` (JSON-serialisable), ``format_inspect(info)`` (Markdown); the plot of
it is ``eval.report.plot_spectra(info, path)`` (PNG).

Group shares. For a group size G the d rotated coordinates form d/G groups; a group's share is its
part of tr(R^T Sigma R). Three layouts are reported, all built from the stored eigenvalues:
    rotated       diag(R^T Sigma R) of the stored R, with Sigma = U diag(lambda) U^T and U recovered
                  from R and the composition (u: U = R; u_h: U = R H; u_h_pbr: U.H = R P^T).
                  None where U cannot be recovered (h, h_pbr, identity, imported files).
                  With the full H of u_h/u_h_pbr this is exactly flat (every entry tr/d).
    eigenbasis    R = U in eigh order: contiguous groups of ascending eigenvalues (worst case).
    bit_reversed  R = U.P_br: eigenvalue of rank i at column br(i), i.e. what P_br alone achieves.
imbalance = n_groups * max share (1.0 = perfectly even, n_groups = all variance in one group).
"""

from __future__ import annotations

import torch

from ..rotation import RotationSet, bit_reverse_indices, recover_eigenvectors

TOP = (1, 4, 16)
GROUP_SIZES = (16, 32, 64)


def _shares(diag: torch.Tensor, g: int) -> list[float]:
    s = diag.reshape(-1, g).sum(-1)
    return (s / s.sum().clamp_min(1e-300)).tolist()


def _one(r: torch.Tensor, lam: torch.Tensor | None, composition: str, group_sizes) -> dict:
    if lam is None:
        return {"eigenvalues": None}
    lam = lam.double().clamp_min(0)  # tiny negative eigenvalues are round-off
    desc = lam.sort(descending=True).values
    total = desc.sum().clamp_min(1e-300)
    d = lam.numel()
    layouts = {"eigenbasis": lam}  # eigh order is ascending
    br = torch.empty(d, dtype=torch.float64)
    br[bit_reverse_indices(d)] = desc
    layouts["bit_reversed"] = br
    u = recover_eigenvectors(r.double(), lam, composition)
    if u is not None:
        sigma = u @ torch.diag(lam) @ u.T
        layouts["rotated"] = torch.diagonal(r.double().T @ sigma @ r.double())
    out = {
        "eigenvalues": desc.tolist(),
        "top_fraction": {str(n): float(desc[:n].sum() / total) for n in TOP if n <= d},
        "effective_rank": float(total**2 / (desc**2).sum().clamp_min(1e-300)),  # participation ratio
        "group_share": {},
        "imbalance": {},
    }
    for g in group_sizes:
        if g > d or d % g:
            continue
        shares = {name: _shares(v, g) for name, v in layouts.items()}
        shares.setdefault("rotated", None)
        out["group_share"][str(g)] = shares
        out["imbalance"][str(g)] = {k: (None if v is None else max(v) * len(v)) for k, v in shares.items()}
    return out


def inspect_rotations(rs: RotationSet, group_sizes=GROUP_SIZES) -> dict:
    """Per layer and kind ("k", "v"): per rotation (one, or one per KV head) spectra, top-1/4/16
    variance fractions, effective rank, group shares and imbalance; plus clip ratio and levels."""
    comp = str(rs.meta.get("composition", "unknown"))
    layers = []
    for i in range(rs.num_layers):
        entry = {"layer": i}
        for kind in ("k", "v"):
            rots = rs.rotation(kind, i)
            eig = getattr(rs, f"{kind}_eigenvalues")
            entry[kind] = {
                "clip": rs.clip(kind, i),
                "levels": rs.levels(kind, i),
                "rotations": [_one(rots[h], None if eig is None else eig[i, h], comp, group_sizes)
                              for h in range(rots.shape[0])],
            }
        layers.append(entry)
    keep = ("model_id", "composition", "objective", "calib_tokens", "group_size", "bits", "per_head", "levels", "clip")
    return {
        "meta": {k: rs.meta[k] for k in keep if k in rs.meta},
        "num_layers": rs.num_layers,
        "head_dim": rs.head_dim,
        "group_sizes": [g for g in group_sizes if g <= rs.head_dim and rs.head_dim % g == 0],
        "layers": layers,
    }


def format_inspect(info: dict) -> str:
    """Markdown table, one row per layer: top-1/4 variance fractions, effective rank, group imbalance
    (eigen order vs bit-reversed, smallest group size) and clip ratios, for K and V."""
    g = str(min(info["group_sizes"])) if info["group_sizes"] else None
    lines = [
        f"{info['meta'].get('model_id', '?')}: {info['num_layers']} layers, head_dim {info['head_dim']}, "
        f"composition {info['meta'].get('composition', '?')}, {info['meta'].get('calib_tokens', '?')} calibration tokens",
        "",
        f"| layer | K top1 | K top4 | K eff. rank | V top1 | V top4 | V eff. rank | K imbalance G={g} eig→br | K clip | V clip |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def first(entry, kind):
        rs = [r for r in entry[kind]["rotations"] if r.get("eigenvalues") is not None]
        return rs[0] if rs else None

    fmt = lambda x: "–" if x is None else f"{x:.2f}"  # noqa: E731
    for e in info["layers"]:
        k, v = first(e, "k"), first(e, "v")
        cells = [str(e["layer"])]
        for r in (k, v):
            if r is None:
                cells += ["–"] * 3
            else:
                cells += [fmt(r["top_fraction"].get("1")), fmt(r["top_fraction"].get("4")), f"{r['effective_rank']:.1f}"]
        imb = k["imbalance"].get(g) if (k and g) else None
        cells.append("–" if not imb else f"{imb['eigenbasis']:.2f}→{imb['bit_reversed']:.2f}")
        cells += [fmt(e["k"]["clip"]) if e["k"]["clip"] else "off", fmt(e["v"]["clip"]) if e["v"]["clip"] else "off"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
