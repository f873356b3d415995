"""The `oscar-kv` command end to end on a tiny local checkpoint (random Llama + a small BPE tokenizer)."""

import json

import pytest
import torch

from oscarkv.cli.main import main


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    from tinymodels import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("tiny"), max_positions=2048, text_chars=200_000)


def test_calibrate_eval_inspect(tiny_ckpt, tmp_path, capsys):
    rot = tmp_path / "rot.safetensors"
    assert main(["calibrate", "--model", str(tiny_ckpt), "--out", str(rot), "--tokens", "512", "--seq-len", "256"]) == 0
    assert rot.exists()
    out = tmp_path / "res.json"
    plot = tmp_path / "res.png"
    rc = main(["eval", "--model", str(tiny_ckpt), "--rotations", str(rot), "--context", "256", "--score-from", "64",
               "--sink", "4", "--recent", "16", "--group-size", "32", "--json", str(out), "--plot", str(plot)])
    assert rc == 0
    res = json.loads(out.read_text())
    assert set(res) >= {"model", "context", "tokens", "results"}
    assert [r["method"] for r in res["results"]] == ["bf16", "naive", "hadamard", "kivi", "int4", "oscar"]
    for r in res["results"]:
        assert set(r) >= {"method", "ppl", "kl", "top1", "bits_per_element", "kv_bytes"}
    bf16 = res["results"][0]
    assert bf16["kl"] == 0 and bf16["top1"] == 1 and bf16["bits_per_element"] == 16
    assert plot.stat().st_size > 10_000
    assert "| oscar |" in capsys.readouterr().out
    spectra = tmp_path / "spectra.png"
    assert main(["inspect", str(rot), "--plot", str(spectra), "--json", str(tmp_path / "i.json")]) == 0
    assert "| layer |" in capsys.readouterr().out and spectra.stat().st_size > 10_000
    info = json.loads((tmp_path / "i.json").read_text())
    assert len(info["layers"]) == 2


def test_errors_are_one_line_messages(tiny_ckpt, tmp_path, capsys):
    assert main(["calibrate", "--model", str(tiny_ckpt), "--out", str(tmp_path / "r.pt")]) == 2
    assert "should end in .safetensors" in capsys.readouterr().err
    assert main(["eval", "--model", str(tiny_ckpt), "--methods", "bf16,oscar"]) == 2
    assert "needs --rotations" in capsys.readouterr().err
    assert main(["eval", "--model", str(tmp_path / "nope"), "--methods", "bf16"]) == 2
    assert "neither 'default' nor a local folder" in capsys.readouterr().err
    assert main(["eval", "--model", str(tiny_ckpt), "--methods", "bf16,int3"]) == 2
    assert "unknown method 'int3'" in capsys.readouterr().err
    assert main(["eval", "--model", str(tiny_ckpt), "--methods", "bf16", "--context", "10000000"]) == 2
    assert "shorter --context" in capsys.readouterr().err


def test_rotation_for_another_model_is_refused(tiny_ckpt, tmp_path, capsys, make_config):
    from oscarkv.rotation import RotationSet, config_hash, hadamard

    other = make_config(layers=3, vocab_size=300)
    h = hadamard(32, torch.float32).expand(3, 1, 32, 32).clone()
    p = RotationSet(h, h, meta={"config_hash": config_hash(other), "model_id": "other"}).save(tmp_path / "o.safetensors")
    assert main(["eval", "--model", str(tiny_ckpt), "--rotations", str(p), "--methods", "bf16,oscar"]) == 2
    assert "does not match this model" in capsys.readouterr().err


def test_calibrate_plus_is_centered_per_head_and_key_weighting_is_recorded(tiny_ckpt, tmp_path):
    from oscarkv.methods import PLUS_PER_HEAD
    from oscarkv.rotation import RotationSet

    rot = tmp_path / "plus.safetensors"
    assert main(["calibrate", "--model", str(tiny_ckpt), "--out", str(rot), "--tokens", "512", "--seq-len", "256",
                 "--plus", "--key-weighting", "attention"]) == 0
    rs = RotationSet.load(rot)
    assert rs.meta["centered"] and rs.meta["per_head"] == PLUS_PER_HEAD
    assert rs.k_rotation.shape[1] == (rs.meta["num_kv_heads"] if PLUS_PER_HEAD else 1)
    assert rs.meta["key_weighting"] == "attention"
    # oscar-plus alone runs from --plus-rotations (no --rotations needed)
    assert main(["eval", "--model", str(tiny_ckpt), "--plus-rotations", str(rot), "--methods", "bf16,oscar-plus",
                 "--context", "256", "--score-from", "64", "--sink", "4", "--recent", "16", "--group-size", "32"]) == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU behaviour of `oscar-kv bench`")
def test_bench_without_a_gpu_runs_the_small_cpu_run_or_says_why_not(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)  # the script writes bench_results.json here
    assert main(["bench"]) == 0
    assert "no CUDA GPU" in capfd.readouterr().err
    assert json.loads((tmp_path / "bench_results.json").read_text())["decode"]
    assert main(["bench", "--sweep"]) == 2  # refused by the script (stderr of the subprocess: capfd)
    err = capfd.readouterr().err
    assert "no CUDA GPU" in err and len(err.strip().splitlines()) == 1
