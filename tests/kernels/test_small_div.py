"""The CUDA decode kernel's ``small_div`` (``cuda/int2_paged.cu``): floor(a / b) as the float quotient of a + 1/2
truncated, with ``__fdividef`` (a times an approximate reciprocal of b). The merge's thread groups and slices rely on
it being exact; the .cu claims so for 0 <= a < 2^20 and 1 <= b < 2^12. Checked here on the CPU in float32 with the
reciprocal off by up to 2 ulp either way (the approximate division's documented bound) over every a < 2^14 and
b < 2^9, which holds all the kernel's operands (a = slice x G D / 4 <= 8 x 256 or the CTA's threads <= 512; b = the
merge slices <= 8 or a merger's outputs), and over random a, b in the claimed range."""

import numpy as np


def small_div(a: np.ndarray, b: np.ndarray, ulps: int) -> np.ndarray:
    """The kernel's rule in float32, the reciprocal moved ``ulps`` float32 steps from the rounded one."""
    r = np.float32(1.0) / b.astype(np.float32)
    step = np.inf if ulps > 0 else -np.inf
    for _ in range(abs(ulps)):
        r = np.nextafter(r, np.float32(step), dtype=np.float32)
    q = (a.astype(np.float32) + np.float32(0.5)) * r  # float32 product, rounded once
    return np.trunc(q).astype(np.int64)


def test_small_div_is_exact_over_the_kernels_operands():
    a = np.arange(1 << 14, dtype=np.int64)[:, None]
    b = np.arange(1, 1 << 9, dtype=np.int64)[None, :]
    want = a // b
    for ulps in (-2, -1, 0, 1, 2):
        assert np.array_equal(small_div(a, b, ulps), want), ulps


def test_small_div_is_exact_over_its_claimed_range():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1 << 20, size=2_000_000)
    b = rng.integers(1, 1 << 12, size=2_000_000)
    for ulps in (-2, 0, 2):
        assert np.array_equal(small_div(a, b, ulps), a // b), ulps
