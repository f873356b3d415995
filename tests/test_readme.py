"""README's "Using it" example runs as written on the embedded model (with a rotation file from the CLI)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Using it"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_readme_example_runs(tmp_path):
    cli = [sys.executable, "-m", "oscarkv.cli.main"]
    subprocess.run([*cli, "calibrate", "--out", "rot.safetensors", "--tokens", "1024"], cwd=tmp_path, check=True,
                   capture_output=True)
    code = _example() + "\nassert out.shape[0] == 2 and out.shape[1] > enc['input_ids'].shape[1]\n"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "'sink'" in r.stdout  # the example's print: bytes per segment, bits per element
