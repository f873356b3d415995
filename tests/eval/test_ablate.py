"""Ablation plumbing on a tiny random Llama with tiny sizes (seconds), plus the rotation algebra."""

import json
from types import SimpleNamespace

import pytest
import torch

from oscarkv.eval import ablate
from oscarkv.eval.ablate import Ablator, derive_composition, run_one
from oscarkv.eval.report import format_ablation, plot_ablation
from oscarkv.rotation import oscar_rotation


@pytest.fixture(scope="module")
def ab(tiny):
    model = tiny()
    g = torch.Generator().manual_seed(1)
    calib = {"pydoc-calib": torch.randint(0, 100, (256,), generator=g),
             "stdlib-docstrings": torch.randint(0, 100, (128,), generator=g)}
    ev = torch.randint(0, 100, (96,), generator=g)
    return Ablator(model, ev, calib, context=96, calib_tokens=128, score_from=16, seq_len=64, progress=False)


@pytest.mark.parametrize("comp", ["identity", "h", "u", "u_h", "u_h_pbr"])
def test_derive_composition_matches_direct(comp):
    """Every composition recovered from a stored u_h_pbr rotation equals the one built directly."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(500, 32, generator=g, dtype=torch.float64) * torch.linspace(0.1, 3, 32, dtype=torch.float64)
    cov = a.T @ a / 500
    r, lam = oscar_rotation(cov, "u_h_pbr")
    want, _ = oscar_rotation(cov, comp)
    got = derive_composition(r.float()[None, None], lam.float()[None, None], comp)[0, 0]
    assert (got.double() - want).abs().max() < 1e-5


def test_derive_composition_refuses_ties():
    r = torch.eye(4)[None, None]
    with pytest.raises(ValueError, match="strictly ascending"):
        derive_composition(r, torch.tensor([[[1.0, 1.0, 2.0, 3.0]]]), "u")


def _check(res, n_rows=None):
    assert "skipped" not in res
    assert res["bf16_ppl"] > 0 and res["context"] == 96
    for r in res["rows"]:
        assert {"variant", "series", "ppl", "kl", "top1", "bits_per_element"} <= r.keys()
        assert r["kl"] >= -1e-6
    if n_rows:
        assert len(res["rows"]) == n_rows
    assert format_ablation(res).startswith(f"### {res['name']}")


def test_rotation(ab, tmp_path):
    res = run_one(ab, "rotation")
    _check(res, 12)
    assert "[clip off]" in format_ablation(res)
    by = {(r["composition"], r["series"]): r for r in res["rows"]}
    # at group == head_dim the bit-reversal permutation is a no-op (only float rounding differs)
    assert by[("u_h", "clip off")]["kl"] == pytest.approx(by[("u_h_pbr", "clip off")]["kl"], rel=1e-3, abs=1e-6)
    # the derived Hadamard composition equals the data-free hadamard method
    had = ab.score("h", ablate.make_method("hadamard", sink=0, recent=0))
    assert by[("h", "clip off")]["kl"] == pytest.approx(had["kl"], rel=1e-3, abs=1e-6)
    assert plot_ablation(res, tmp_path / "rotation.png").stat().st_size > 1000


def test_clipping_windows_group(ab, tmp_path):
    _check(run_one(ab, "clipping"), 6)
    w = run_one(ab, "windows", sizes=(0, 8))
    _check(w, 8)
    # more BF16 tokens, more bits per element
    osc = [r for r in w["rows"] if r["series"] == "oscar, vary recent"]
    assert osc[1]["bits_per_element"] > osc[0]["bits_per_element"]
    assert plot_ablation(w, tmp_path / "windows.png").exists()
    g = run_one(ab, "group", sizes=(16, 32))
    _check(g, 8)
    assert {r["group_size"] for r in g["rows"]} == {16, 32}


def test_calibration_ablations(ab, tmp_path):
    cs = run_one(ab, "calib-size", sizes=(64, 128, 10_000))
    _check(cs, 4)  # hadamard + 3 sizes, the last capped by the text
    assert [r.get("x") for r in cs["rows"][1:]] == [64, 128, 256]
    assert plot_ablation(cs, tmp_path / "calib-size.png").exists()
    _check(run_one(ab, "calib-domain"), 3)
    lv = run_one(ab, "levels")
    if "skipped" not in lv:
        _check(lv, 2)
        assert lv["rows"][0]["kl"] != lv["rows"][1]["kl"]


def test_reference_computed_once(ab):
    assert len(ab.reference) == 1


def test_run_ablations_cli_plumbing(ab, tmp_path, monkeypatch):
    """`oscar-kv ablate` writes <name>.json, <name>.png and summary.md (model loading stubbed)."""
    from oscarkv.cli import commands
    from oscarkv.cli.commands import cmd_ablate

    import oscarkv.data as data
    import oscarkv.models as models

    class Tok:
        def __call__(self, text, add_special_tokens=False, return_tensors="pt"):
            return SimpleNamespace(input_ids=torch.randint(0, 100, (1, 300), generator=torch.Generator().manual_seed(2)))

    monkeypatch.setattr(models, "load_model", lambda name: SimpleNamespace(model=ab.model, tokenizer=Tok(), model_id="tiny"))
    monkeypatch.setattr(data, "builtin_text", lambda name: name)
    monkeypatch.setattr(commands, "_peek_config", lambda name: ab.model.config)  # "tiny" is no folder
    monkeypatch.setattr(commands, "_peek_tokenizer", lambda name: Tok())
    args = SimpleNamespace(model="tiny", what="clipping,levels", context=96, calib_tokens=128, out_dir=str(tmp_path))
    cmd_ablate(args)
    res = json.loads((tmp_path / "clipping.json").read_text())
    assert res["model"] == "tiny" and len(res["rows"]) == 6
    assert (tmp_path / "clipping.png").exists()
    assert "### clipping" in (tmp_path / "summary.md").read_text()
    with pytest.raises(ValueError, match="unknown ablation"):
        cmd_ablate(SimpleNamespace(**{**vars(args), "what": "nope"}))


def test_centering_ablation_builds_every_variant_from_one_pass(ab, tmp_path):
    res = run_one(ab, "centering")
    _check(res, 9)
    assert {r["series"] for r in res["rows"]} == {"centered", "not centered"}
    # one streaming pass (per calibration text and size) for every rotation variant
    built = [k for k in ab._rots if k[0] == "pydoc-calib" and k[1] == ab.calib_tokens]
    assert len(built) >= 6 and ("stats", "pydoc-calib", ab.calib_tokens) in ab._rots
    assert plot_ablation(res, tmp_path / "centering.png").stat().st_size > 1000
