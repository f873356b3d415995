"""Issue 11, third adversarial pass: refusals that used to come only after the model was loaded, the
calibration ran or other methods were evaluated, and API values that were silently accepted."""

import math

import pytest
import torch

from oscarkv.cache import OscarCache
from oscarkv.cli.main import main
from oscarkv.errors import InputError
from oscarkv.methods import make_method, parse_methods

from adv_helpers import ckpt, good_rotations, no_model_load, one_line_error as _err, tiny_config  # noqa: F401 (fixtures)




@pytest.fixture
def files(tmp_path, ckpt):
    from transformers import AutoConfig

    from oscarkv.rotation import config_hash

    (tmp_path / "empty.txt").write_text("  \n")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 ".encode("latin-1") * 50)
    rs = good_rotations()  # for the checkpoint's model, but without means or levels
    rs.meta["config_hash"] = config_hash(AutoConfig.from_pretrained(ckpt))
    rs.save(tmp_path / "rot.safetensors")
    return tmp_path


@pytest.mark.parametrize("argv, match", [
    # run: --methods were parsed only after the calibration (minutes on SmolLM2)
    (["run", "--methods", "oscar,bogus"], "unknown method 'bogus'"),
    # run: --only-pure with --no-pure left no table to compute, found after the calibration
    (["run", "--only-pure", "--no-pure"], "--only-pure and --no-pure"),
    # run: --reuse-rotations was read after the model load
    (["run", "--reuse-rotations", "{d}/nowhere"], "--reuse-rotations"),
    # eval: the text was read after the model load
    (["eval", "--methods", "bf16,naive", "--data", "{d}/empty.txt"], "empty"),
    (["eval", "--methods", "bf16,naive", "--data", "{d}/latin1.txt"], "not UTF-8"),
    (["calibrate", "--out", "{d}/r.safetensors", "--data", "{d}/latin1.txt"], "not UTF-8"),
    # eval: a method the rotation file cannot serve failed after the model load and after every method
    # before it in the list had been evaluated
    (["eval", "--methods", "bf16,naive,oscar-plus", "--rotations", "{d}/rot.safetensors"], "calibrated means"),
    (["eval", "--methods", "bf16,oscar", "--levels", "lloyd-max", "--rotations", "{d}/rot.safetensors"], "fitted levels"),
    # the same method twice was evaluated twice (one row overwriting the other in the JSON)
    (["eval", "--methods", "bf16,naive,naive"], "naive' is listed twice"),
    # eval --task passkey silently ignored --plot and --peers (and --data, now its haystack)
    (["eval", "--task", "passkey", "--methods", "bf16", "--plot", "{d}/p.png"], "--plot applies to --task ppl only"),
    (["eval", "--task", "passkey", "--methods", "bf16", "--peers", "quanto"], "--peers applies to --task ppl only"),
    # and the other task's flags (their defaults are None now, so a given one is seen)
    (["eval", "--task", "passkey", "--methods", "bf16", "--context", "2048"], "--context applies to --task ppl only"),
    (["eval", "--task", "passkey", "--methods", "bf16", "--sequences", "3"], "--sequences applies to --task ppl only"),
    (["eval", "--methods", "bf16", "--lengths", "1024"], "--lengths applies to --task passkey only"),
    (["eval", "--methods", "bf16", "--trials", "3"], "--trials applies to --task passkey only"),
    (["eval", "--task", "passkey", "--methods", "bf16", "--data", "{d}/latin1.txt"], "not UTF-8"),
    # not enough text for the tokens asked for: found by the tokenizer only after the model load
    (["calibrate", "--out", "{d}/r.safetensors", "--tokens", "1000000000"], "fewer than the 1000000000 asked for"),
    (["eval", "--methods", "bf16,naive", "--context", "200", "--score-from", "100", "--sequences", "1000000"],
     "are needed for 1000000 x 200"),
    (["run", "--calib-tokens", "1000000000"], "fewer than the 1000000000 asked for"),
    (["run", "--context", "100000000"], "are needed for 1 x 100000000"),
    (["ablate", "--context", "100000000"], "fewer than the 100000000 asked for"),
    (["ablate", "--calib-tokens", "1000000000"], "1000000000 asked for"),  # was raised in the first ablation
    # fewer calibration tokens than head_dim: refused by the calibration, after the model load
    (["calibrate", "--out", "{d}/r.safetensors", "--tokens", "16"], "fewer than head_dim=32"),
    (["run", "--calib-tokens", "16"], "fewer than head_dim=32"),
    (["ablate", "--calib-tokens", "16"], "fewer than head_dim=32"),
    (["eval", "--task", "passkey", "--methods", "bf16", "--lengths", "10"], "passkey length 10 is too short"),
    # ablate: a context of 3 failed in the harness after the model load and calibration
    (["ablate", "--context", "3"], "context 3 is too short"),
])
def test_refused_before_loading(argv, match, ckpt, files, capsys, no_model_load, monkeypatch):
    monkeypatch.chdir(files)
    argv = [a.format(d=files) for a in argv]
    argv = [argv[0], "--model", str(ckpt), *argv[1:]]
    if argv[0] in ("run", "ablate"):
        argv += ["--out-dir", str(files / "out")]
    assert main(argv) == 2
    assert match in _err(capsys)


def test_reuse_rotations_checked_against_the_model_before_loading(ckpt, tmp_path, capsys, no_model_load):
    d = tmp_path / "prev"
    d.mkdir()
    other = good_rotations(layers=3)  # another model's files
    for name in ("rotations", "rotations-centered", "rotations-plus", "rotations-plus-alt"):
        other.save(d / f"{name}.safetensors")
    assert main(["run", "--model", str(ckpt), "--reuse-rotations", str(d), "--out-dir", str(tmp_path / "o")]) == 2
    assert "does not match this model" in _err(capsys)


def test_reused_files_without_log8_tops_refused_before_loading(ckpt, tmp_path, capsys, no_model_load):
    """run --methods oscar+log8 --reuse-rotations DIR of files written before the log8 scale tops existed: refused
    in one line before the model loads (the eval would have failed on its first log8 method)."""
    from transformers import AutoConfig

    from oscarkv.rotation import config_hash

    d = tmp_path / "prev"
    d.mkdir()
    rs = good_rotations()
    rs.meta["config_hash"] = config_hash(AutoConfig.from_pretrained(ckpt))
    for name in ("rotations", "rotations-centered", "rotations-plus", "rotations-plus-alt"):
        rs.save(d / f"{name}.safetensors")
    argv = ["run", "--model", str(ckpt), "--methods", "oscar+log8", "--reuse-rotations", str(d), "--out-dir",
            str(tmp_path / "o")]
    assert main(argv) == 2
    assert "log8 scale tops" in _err(capsys)


@pytest.mark.parametrize("make, match", [
    (lambda c: OscarCache(None, "naive"), "model.config"),
    (lambda c: OscarCache({"num_hidden_layers": 2}, "naive"), "model.config"),
    (lambda c: OscarCache(c, "naive", max_tokens=True), "max_tokens"),
    (lambda c: OscarCache(c, "naive", kernel_backend="bogus"), "kernel_backend"),
    (lambda c: OscarCache(c, "naive", backend="reference", max_tokens=4096), "max_tokens=4096 sets the paged backend"),
    # an explicit page with an explicit paged backend was silently replaced by the kernels' page of 16
    (lambda c: OscarCache(c, "naive", backend="paged", sink=16, recent=16, group_size=32, page=4), "page=4: the paged"),
    (lambda c: OscarCache(c, "naive", backend="reference", kernel_backend="cuda"), "kernel_backend='cuda' sets the paged"),
    (lambda c: make_method(None), "method name"),
    (lambda c: __import__("oscarkv.methods", fromlist=["KVMethod"]).KVMethod(5), "name must be a non-empty string"),
    (lambda c: make_method("oscar+center+nocenter"), "contradict"),
    (lambda c: parse_methods("bf16,oscar,oscar"), "listed twice"),
    (lambda c: make_method("naive").at_bits(float("nan"), 4096, 64), "bits"),
    (lambda c: make_method("naive").at_bits("3", 4096, 64), "bits"),
    (lambda c: make_method("naive").at_bits(3, 0, 64), "context"),
    (lambda c: make_method("naive").at_bits(3, 4096, 0), "head_dim"),
    (lambda c: make_method("naive").at_bits(3, 4096, -64), "head_dim"),
    (lambda c: make_method("naive").bits_per_element(0, 64), "context"),
])
def test_api_values_refused(make, match):
    with pytest.raises(InputError, match=match):
        make(tiny_config())


def test_passing_the_model_instead_of_its_config():
    from tinymodels import tiny_model

    with pytest.raises(InputError, match="model.config"):
        OscarCache(tiny_model(), "naive")


def test_at_bits_still_works():
    m = make_method("naive").at_bits(3.0, 4096, 64)
    assert m.bits_per_element(4096, 64) <= 3.0 and m.recent > 0
    held = 4096 - 64 - 256 - 7.5  # quantized tokens, averaged over the page of 16
    assert math.isclose(make_method("naive").bits_per_element(4096, 64), (held * 2.5 + (4096 - held) * 16) / 4096)


def test_passkey_uses_data_as_haystack(ckpt, tmp_path, monkeypatch):
    """Before: ``eval --task passkey --data FILE`` ran on the built-in pydoc-eval text, silently."""
    from oscarkv.eval import passkey

    seen = {}

    def fake(lm, methods, rotations=None, haystack=None, **kw):
        seen["haystack"] = haystack
        return {"rows": [], "details": []}

    monkeypatch.setattr(passkey, "run_passkey", fake)
    monkeypatch.setattr(passkey, "format_passkey", lambda res: "")
    (tmp_path / "hay.txt").write_text("needle-free text " * 2000)
    assert main(["eval", "--model", str(ckpt), "--task", "passkey", "--methods", "bf16", "--lengths", "250",
                 "--data", str(tmp_path / "hay.txt")]) == 0
    assert seen["haystack"].startswith("needle-free text")


@pytest.mark.parametrize("ids, match", [
    (torch.arange(200) % 100 + 50, r"token id 149, outside the model's vocabulary \[0, 100\)"),  # was an IndexError in the pass
    ((torch.arange(200) % 100).float() + 0.5, "integer token ids"),  # was silently truncated
])
def test_calibration_ids_checked_before_the_passes(ids, match):
    from tinymodels import tiny_model

    from oscarkv.calibrate import calibrate

    with pytest.raises(InputError, match=match):
        calibrate(tiny_model(), ids, seq_len=64, progress=False, sample_tokens=64)


@pytest.mark.parametrize("kw, match", [
    (dict(sequences=0), "sequences must be an integer >= 1"),  # was a ZeroDivisionError at the end
    (dict(context=100.5), "context must be an integer"),
    (dict(ids=torch.arange(1000).view(10, 100) % 100), "1-D tensor"),
    (dict(ids=torch.arange(1000) % 100 + 100), "outside the model's vocabulary"),  # was an IndexError in the model
])
def test_evaluate_arguments(kw, match):
    from tinymodels import tiny_model

    from oscarkv.eval.harness import evaluate

    args = dict(ids=torch.arange(1000) % 100, context=100, sequences=1)
    args.update(kw)
    with pytest.raises(InputError, match=match):
        evaluate(tiny_model(), args.pop("ids"), [make_method("bf16"), make_method("naive", sink=4, recent=4)],
                 score_from=10, progress=False, **args)


def test_run_that_fails_at_the_load_leaves_no_empty_folder(ckpt, tmp_path, capsys, monkeypatch):
    """`run` made its timestamped output folder before loading the model; a failed load left it empty."""
    from oscarkv.cli import commands
    from oscarkv.errors import NotFoundError

    def fail(*a, **k):
        raise NotFoundError("model weights not found (test)")
    monkeypatch.setattr(commands, "_load", fail)
    out = tmp_path / "o"
    assert main(["run", "--model", str(ckpt), "--out-dir", str(out), "--calib-tokens", "256", "--context", "600"]) != 0
    assert "model weights not found" in _err(capsys)
    assert not out.exists() or not any(out.iterdir())
