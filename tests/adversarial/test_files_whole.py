"""Issue 11: files are written whole (no .tmp left, not even on SIGTERM) and honour the umask."""

import os
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

from oscarkv.errors import InputError
from oscarkv.eval.report import write_json
from oscarkv.fileio import atomic_write, check_output_path, source_commit

from adv_helpers import cfg, good_rotations


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def test_files_honour_umask(tmp_path, umask022):
    assert _mode(write_json({"a": 1}, tmp_path / "r.json")) == 0o644
    assert _mode(good_rotations().save(tmp_path / "r.safetensors")) == 0o644
    os.umask(0o077)
    assert _mode(write_json({"a": 1}, tmp_path / "private.json")) == 0o600


def test_replacing_keeps_the_old_mode(tmp_path, umask022):
    p = write_json({"a": 1}, tmp_path / "r.json")
    os.chmod(p, 0o640)
    write_json({"a": 2}, p)
    assert _mode(p) == 0o640


def test_failed_write_leaves_nothing(tmp_path):
    def fail(tmp):
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("disk full")
    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "x.json", fail)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TypeError):  # not JSON-serialisable: refused before touching the disk
        write_json({"a": object()}, tmp_path / "y.json")
    assert list(tmp_path.iterdir()) == []


def test_json_into_directory_refused(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        write_json({"a": 1}, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path, match", [("/proc/x.safetensors", "cannot be written"), ("", "empty path")])
def test_check_output_path(path, match):
    with pytest.raises(InputError, match=match):
        check_output_path(path, "--out")


def test_check_output_path_creates_nothing(tmp_path):
    check_output_path(tmp_path / "a" / "b" / "c.json")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("via_cli_handler", [False, True])
def test_sigterm_during_save_leaves_no_tmp(tmp_path, via_cli_handler):
    """A process killed with SIGTERM while writing removes its temp file and dies of SIGTERM."""
    script = textwrap.dedent(f"""
        import signal, sys, time
        from oscarkv.fileio import atomic_write
        if {via_cli_handler}:
            from oscarkv.cli.main import _terminate
            signal.signal(signal.SIGTERM, _terminate)
        def slow(tmp):
            with open(tmp, "w") as f:
                f.write("partial")
            print("writing", flush=True)
            time.sleep(30)
        atomic_write({str(tmp_path / 'out.json')!r}, slow)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout.readline().strip() == b"writing"
    assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=20)
    assert rc != 0
    if not via_cli_handler:
        assert rc == -signal.SIGTERM  # the default disposition is kept: killed by SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_head_dim_message_lists_what_works():
    from oscarkv.rotation import hadamard

    assert hadamard(32).shape == (32, 32)  # 32 works
    with pytest.raises(InputError) as e:
        hadamard(48)
    assert "32, 64, 128, 256" in str(e.value) and "(64, 128, 256" not in str(e.value)


def test_plots_are_written_whole(tmp_path, monkeypatch):
    """Before: ``savefig`` wrote straight into the target, so a failure (or SIGTERM) half way left a
    truncated PNG in place of the previous one."""
    from matplotlib.figure import Figure

    from oscarkv.eval.report import plot_error_vs_bits

    res = {"results": [{"method": "bf16", "bits_per_element": 16.0, "kl": 0.0},
                       {"method": "naive", "bits_per_element": 2.5, "kl": 0.1}]}
    p = plot_error_vs_bits([("w", res)], tmp_path / "p.png")
    good = p.read_bytes()
    assert good[:4] == b"\x89PNG"
    real = Figure.savefig

    def half(self, fname, *a, **k):
        real(self, fname, *a, **k)
        with open(fname, "r+b") as f:
            f.truncate(100)
        raise RuntimeError("disk full")

    monkeypatch.setattr(Figure, "savefig", half)
    with pytest.raises(RuntimeError, match="disk full"):
        plot_error_vs_bits([("w", res)], tmp_path / "p.png")
    assert p.read_bytes() == good and sorted(x.name for x in tmp_path.iterdir()) == ["p.png"]


def test_ablation_summary_written_whole(tmp_path, monkeypatch):
    import oscarkv.fileio as fileio
    from oscarkv.eval.report import write_ablation_summary

    calls = []
    real = fileio.atomic_write
    monkeypatch.setattr(fileio, "atomic_write", lambda path, write: calls.append(path) or real(path, write))
    out = write_ablation_summary(tmp_path, "m", [])
    assert calls == [out] and out.read_text().startswith("# Ablations")



def test_outputs_never_replace_inputs(tmp_path, capsys, monkeypatch):
    """Before: ``oscar-kv inspect ROT --json ROT`` replaced the rotation file by the JSON report (and
    ``eval --json`` / ``calibrate --out`` could likewise replace ``--rotations`` / ``--data``)."""
    from oscarkv.cli import commands
    from oscarkv.cli.main import main

    monkeypatch.setattr(commands, "_load", lambda *a: (_ for _ in ()).throw(AssertionError("loaded")))
    rot = good_rotations().save(tmp_path / "rot.safetensors")
    before = rot.read_bytes()
    link = tmp_path / "link.safetensors"
    link.symlink_to(rot)
    (tmp_path / "text.txt").write_text("some text " * 100)
    for argv, match in [
        (["inspect", str(rot), "--json", str(rot)], "--json"),
        (["inspect", str(rot), "--json", str(link)], "--json"),  # the same file through a symlink
        (["eval", "--methods", "bf16,oscar", "--rotations", str(rot), "--json", str(rot)], "is also --rotations"),
        (["eval", "--methods", "bf16", "--json", str(tmp_path / "a.png"), "--plot", str(tmp_path / "a.png")], "is also --json"),
        (["calibrate", "--out", str(tmp_path / "t.safetensors"), "--data", str(tmp_path / "t.safetensors")], "is also --data"),
    ]:
        assert main(argv) == 2
        assert match in capsys.readouterr().err
    assert rot.read_bytes() == before


def test_source_commit_names_the_tree(monkeypatch):
    """Results files name their code: OSCARKV_COMMIT where set (the GPU machine's copy of the tree has stale git
    metadata), else this checkout's HEAD."""
    monkeypatch.setenv("OSCARKV_COMMIT", "abc1234")
    assert source_commit() == "abc1234"
    monkeypatch.delenv("OSCARKV_COMMIT")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert source_commit() == (head or "unknown")
