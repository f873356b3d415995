import pytest
import torch

from adv_helpers import tiny_config


@pytest.fixture
def cfg():
    return tiny_config()


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
