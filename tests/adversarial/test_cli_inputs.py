"""Issue 11 item 5: every argument and output path is checked before the model is loaded, and every
refusal is one line (exit code 2). Also: the CLI catches only the package's error base class."""

import json
import shutil

import pytest

from oscarkv.cli import commands
from oscarkv.cli.main import main

from adv_helpers import cfg, ckpt, good_rotations, no_model_load, one_line_error as _err  # noqa: F401 (fixtures)




@pytest.mark.parametrize("argv, match", [
    (["run", "--context", "0"], "--context: must be positive"),
    (["run", "--context", "300"], "too short"),
    (["eval", "--group-size", "0"], "--group-size: must be positive"),
    (["eval", "--sequences", "0"], "--sequences: must be positive"),
    (["eval", "--task", "passkey", "--lengths", "abc"], "--lengths: expected an integer"),
    (["eval", "--task", "passkey", "--lengths", "1024,-5"], "must be positive"),
    (["eval", "--context", "abc"], "--context: expected an integer"),
    (["eval", "--sink", "-1"], "--sink: must be >= 0"),
    (["eval", "--methods", "bf16", "--context", "512", "--score-from", "600"], "--score-from 600 must be below"),
    (["eval", "--peers", "quanto,gptq", "--methods", "bf16"], "--peers gptq: unknown"),
    (["eval", "--levels", "lloyd_max"], "invalid choice: 'lloyd_max'"),
    (["calibrate", "--out", "r.safetensors", "--tokens", "0"], "--tokens: must be positive"),
    (["calibrate", "--out", "r.safetensors", "--seq-len", "0"], "--seq-len: must be positive"),
    (["calibrate", "--out", "r.safetensors", "--group-size", "0"], "--group-size: must be positive"),
    (["calibrate", "--out", "r.safetensors", "--composition", "u_h_br"], "--composition 'u_h_br' is unknown"),
    (["calibrate", "--out", "/proc/x.safetensors"], "cannot be written"),
    (["ablate", "--what", "rotation,colour"], "unknown ablation(s) ['colour']"),
    (["ablate", "--out-dir", "/proc/ablate"], "cannot be written"),
    (["ablate", "--context", "0"], "--context: must be positive"),
    (["nonsense"], "invalid choice"),
    (["eval", "--task", "passkey", "--depths", "0.5,1.5"], "depth 1.5 is outside [0, 1]"),
    (["eval", "--task", "passkey", "--depths", "nan"], "outside [0, 1]"),
    (["eval", "--task", "passkey", "--trials", "0"], "--trials: must be positive"),
    (["run", "--calib-tokens", "0"], "--calib-tokens: must be positive"),
    (["eval", "--methods", "naive,hadamard"], "--methods must include bf16"),
])
def test_bad_arguments_refused_before_loading(argv, match, capsys, no_model_load, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert match in _err(capsys)


def test_output_paths_checked_first(ckpt, tmp_path, capsys, no_model_load):
    d = tmp_path / "out"
    d.mkdir()
    assert main(["eval", "--model", str(ckpt), "--methods", "bf16", "--json", str(d)]) == 2
    assert "--json" in _err(capsys) and list(d.iterdir()) == []  # no .tmp left behind
    assert main(["eval", "--model", str(ckpt), "--methods", "bf16", "--plot", str(tmp_path / "p.xyz")]) == 2
    assert "should end in .png" in _err(capsys)
    assert main(["eval", "--model", str(ckpt), "--methods", "bf16", "--json", "/proc/self/x/y.json"]) == 2
    assert "cannot be written" in _err(capsys) or "is a file" in capsys.readouterr().err
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["calibrate", "--model", str(ckpt), "--out", str(f / "r.safetensors")]) == 2
    assert "is a file, not a folder" in _err(capsys)
    assert main(["run", "--out-dir", str(f)]) == 2
    assert "exists and is not a folder" in _err(capsys)


def test_data_checked_first(ckpt, tmp_path, capsys, no_model_load):
    assert main(["calibrate", "--model", str(ckpt), "--out", str(tmp_path / "r.safetensors"), "--data", str(tmp_path)]) == 2
    assert "is a directory" in _err(capsys)
    assert main(["eval", "--model", str(ckpt), "--methods", "bf16", "--data", str(tmp_path / "nope.txt")]) == 2
    assert "does not exist" in _err(capsys)


def test_rotation_file_checked_before_model(ckpt, tmp_path, capsys, no_model_load):
    rs = good_rotations()
    rs.k_rotation[0, 0, 0, 0] = float("nan")
    p = rs.save(tmp_path / "bad.safetensors")
    assert main(["eval", "--model", str(ckpt), "--rotations", str(p), "--methods", "bf16,oscar"]) == 2
    assert "k_rotation (layer 0, rotation 0) contains NaN" in _err(capsys)
    assert main(["eval", "--model", str(ckpt), "--rotations", str(tmp_path), "--methods", "bf16,oscar"]) == 2
    assert "is a directory" in _err(capsys)


def test_broken_checkpoints_one_line(ckpt, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(ckpt, broken)
    (broken / "config.json").write_text("{not json")
    assert main(["eval", "--model", str(broken), "--methods", "bf16"]) == 2
    assert "config.json is not valid JSON" in _err(capsys)
    (broken / "config.json").write_text(json.dumps({"hidden_size": 3}))
    assert main(["eval", "--model", str(broken), "--methods", "bf16"]) == 2
    assert "has no model_type" in _err(capsys)
    noweights = tmp_path / "noweights"
    shutil.copytree(ckpt, noweights)
    for w in noweights.glob("*.safetensors"):
        w.unlink()
    assert main(["eval", "--model", str(noweights), "--methods", "bf16"]) == 2
    assert "has no model weights" in _err(capsys)
    wrong = tmp_path / "wrong"
    shutil.copytree(ckpt, wrong)
    cfg = json.loads((wrong / "config.json").read_text())
    cfg["model_type"] = "no-such-architecture"
    (wrong / "config.json").write_text(json.dumps(cfg))
    assert main(["eval", "--model", str(wrong), "--methods", "bf16"]) == 2
    assert "cannot read the model config" in _err(capsys)


def test_inspect_inconsistent_file(tmp_path, capsys):
    rs = good_rotations()
    rs.k_eigenvalues = rs.k_eigenvalues[:1]  # 1 layer of eigenvalues, 2 of rotations: IndexError before
    p = rs.save(tmp_path / "r.safetensors")
    assert main(["inspect", str(p)]) == 2
    assert "k_eigenvalues has shape (1, 1, 32), expected (2, 1, 32)" in _err(capsys)
    assert main(["inspect", str(tmp_path / "missing.safetensors")]) == 2
    assert "does not exist" in _err(capsys)


def test_shape_arguments_checked_before_loading(ckpt, tmp_path, capsys, no_model_load):
    assert main(["eval", "--model", str(ckpt), "--methods", "bf16,naive", "--group-size", "24"]) == 2
    assert "--group-size 24 does not divide the model's head_dim 32; use one of [16, 32]" in _err(capsys)
    assert main(["calibrate", "--model", str(ckpt), "--out", str(tmp_path / "r.safetensors"), "--group-size", "24"]) == 2
    assert "does not divide" in _err(capsys)
    other = good_rotations(layers=3)
    p = other.save(tmp_path / "other.safetensors")
    assert main(["eval", "--model", str(ckpt), "--rotations", str(p), "--methods", "bf16,oscar"]) == 2
    assert "does not match this model" in _err(capsys)


def test_context_past_max_positions_warns(ckpt, tmp_path, capsys):
    assert main(["eval", "--model", str(ckpt), "--methods", "bf16", "--context", "300", "--score-from", "64",
                 "--json", str(tmp_path / "r.json")]) == 0
    assert "past the model's max_position_embeddings (256)" in capsys.readouterr().err


def test_only_package_errors_are_caught(monkeypatch, tmp_path, capsys):
    """A bare KeyError / RuntimeError is a bug: it must keep its traceback, not become 'error: ...'."""
    def bug(a):
        raise KeyError("internal")
    monkeypatch.setattr(commands, "cmd_inspect", bug)
    with pytest.raises(KeyError):
        main(["inspect", str(tmp_path / "x")])


def test_every_user_error_class_derives_from_base():
    import oscarkv.errors as E
    from oscarkv.rotation import RotationMismatchError
    from oscarkv.rotation.checks import RotationFileError

    for cls in (E.InputError, E.StateError, E.NotFoundError, E.UnsupportedError, RotationMismatchError, RotationFileError):
        assert issubclass(cls, E.OscarKVError)
    assert issubclass(E.NotFoundError, FileNotFoundError) and issubclass(E.UnsupportedError, NotImplementedError)


def test_unloadable_weights_one_line(ckpt, tmp_path, capsys):
    bad = tmp_path / "badweights"
    shutil.copytree(ckpt, bad)
    (bad / "model.safetensors").write_bytes(b"garbage")
    assert main(["eval", "--model", str(bad), "--methods", "bf16"]) == 2
    assert "cannot load the model" in _err(capsys)
