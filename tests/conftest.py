"""Fixtures every test folder shares: one torch thread, the tiny random decoder and its rotations.

Test folders are not packages, so helpers reach tests as fixtures: ``make_config`` / ``tiny`` return
the builders of tests/tinymodels.py, ``config`` / ``model`` / ``rotations`` are the session-wide
default instances.
"""

import pytest
import torch
from tinymodels import random_rotations, tiny_config, tiny_model

_OWN_THREADS = ("kernels", "vllm")  # GPU-side suites (run on the device too): torch's default threads


@pytest.fixture(autouse=True)
def _one_thread(request):
    """Tiny tensors are overhead-bound: one thread is ~10x faster than two on a shared 2-core box."""
    if any(part in _OWN_THREADS for part in request.path.relative_to(request.config.rootpath).parts[:-1]):
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def make_config():
    return tiny_config


@pytest.fixture(scope="session")
def tiny():
    return tiny_model


@pytest.fixture(scope="session")
def make_rotations():
    return random_rotations


@pytest.fixture(scope="session")
def config():
    return tiny_config()


@pytest.fixture(scope="session")
def model(config):
    return tiny_model()


@pytest.fixture(scope="session")
def rotations(config):
    return random_rotations(config)
