"""The Makefile's install refuses, in one line and before creating anything, when the disk cannot hold the venv."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("var", ["VENV", "VVENV"])
def test_install_refuses_a_full_disk(tmp_path, var):
    venv = tmp_path / "missing" / "venv"
    target = {"VENV": "venv", "VVENV": f"{venv}/.installed"}[var]
    r = subprocess.run(["make", "-C", str(ROOT), f"{var}={venv}", f"{var}_GB=100000000", target],
                       capture_output=True, text=True)
    assert r.returncode != 0
    ours = [line for line in r.stderr.splitlines() if "GB of disk" in line]
    assert len(ours) == 1 and f"make {var}=" in ours[0] and "free some space" in ours[0], r.stderr
    assert not (tmp_path / "missing").exists()  # nothing created, nothing downloaded
