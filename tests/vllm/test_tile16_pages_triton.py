"""The vLLM backend's tile16 pages written by the Triton append (row by row, 2-bit fields by atomics), on CPU
under TRITON_INTERPRET=1 (main venv; `make test` sets it): the same scenarios as test_vllm_core's, against the
dense reference."""

import os

import pytest
import torch

from test_vllm_core import S, check, toks  # vLLM-free helpers of the engine-free tests

from oscarkv.integrations.vllm.testing import MiniVLLM

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
                                reason="the Triton kernels need a GPU or TRITON_INTERPRET=1")


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


def test_log8_tile16_pages_take_the_torch_path():
    """log8 pages (OSCAR_KV_SCALE_DTYPE=log8) with kernels="triton": the Triton kernels read float scales, so
    the layer writes and decodes through the kernels' torch reference, over tile16 records of 8 d + 64 bytes."""
    m = MiniVLLM(S, kernels="triton", layout="tile16", num_blocks=14, scale_dtype="log8")
    assert m.layer.kernels == "torch"
    m.add("a", toks(33, 150))
    check(m.step([("a", 70)]))
    for _ in range(4):
        check(m.step([("a", 1)]))
    assert m.layer.layout == "tile16" and m.kv.view(torch.uint8).shape[-1] * 16 == 8 * 64 + 64
