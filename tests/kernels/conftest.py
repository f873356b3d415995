import os

import pytest
import torch

# triton.jit picks the interpreter when a kernel module is imported; oscarkv.kernels imports its Triton
# modules lazily, so setting this here (before any test calls a Triton op) is enough on CPU-only hosts.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _triton_usable() -> bool:
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1"


requires_triton = pytest.mark.skipif(not _triton_usable(), reason="triton missing (or no GPU and TRITON_INTERPRET!=1)")


@pytest.fixture
def device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
