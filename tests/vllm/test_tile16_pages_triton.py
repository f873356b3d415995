"""The vLLM backend's tile16 pages written by the Triton append (row by row, 2-bit fields by atomics), on CPU
under TRITON_INTERPRET=1 (main venv; `make test` sets it): the same scenarios as test_vllm_core's, against the
dense reference."""

import os

import pytest
import torch

from oscarkv.integrations.vllm.core import OscarSettings
from oscarkv.integrations.vllm.testing import MiniVLLM

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
                                reason="the Triton kernels need a GPU or TRITON_INTERPRET=1")
S = OscarSettings(rotations="x", sink=16, recent=32, page=16)


def toks(seed, n):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 1000, (n,), generator=g).tolist()


def check(res, atol=2e-5):
    for rid, (out, exp) in res.items():
        assert torch.allclose(out, exp, atol=atol, rtol=1e-4), (rid, (out - exp).abs().max().item())


def test_triton_writes_tile16_pages_chunks_decode_reuse():
    m = MiniVLLM(S, kernels="triton", layout="tile16", num_blocks=14)
    m.add("a", toks(31, 160))
    m.add("b", toks(32, 160))
    check(m.step([("a", 70), ("b", 23)]))  # several tokens of one block in one launch
    for _ in range(6):
        check(m.step([("a", 1), ("b", 1)]))
    m.preempt("b")  # its blocks (stale bits) are reused by a, then by b's recompute
    check(m.step([("a", 40)]))
    check(m.step([("b", 72)]))
    for _ in range(3):
        check(m.step([("a", 1), ("b", 1)]))
    assert m.layer.layout == "tile16"
