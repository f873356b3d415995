import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from oscarkv.rotation import RotationSet, config_hash


def tiny_config(layers=2):
    return LlamaConfig(hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                       num_hidden_layers=layers, intermediate_size=64, vocab_size=100)


def random_rotations(config, per_head=False, seed=0):
    """Random orthogonal R_K / R_V per layer (a stand-in for calibrated OSCAR rotations)."""
    g = torch.Generator().manual_seed(seed)
    n, d = config.num_hidden_layers, config.head_dim
    r = config.num_key_value_heads if per_head else 1
    orth = lambda: torch.linalg.qr(torch.randn(n, r, d, d, generator=g))[0]
    return RotationSet(k_rotation=orth(), v_rotation=orth(),
                       k_clip=torch.full((n,), 0.96), v_clip=torch.full((n,), 0.92),
                       meta={"model_id": "tiny", "config_hash": config_hash(config)})


@pytest.fixture(scope="session")
def config():
    return tiny_config()


@pytest.fixture(scope="session")
def model(config):
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="session")
def rotations(config):
    return random_rotations(config)


@pytest.fixture(scope="session")
def make_rotations():
    return random_rotations


@pytest.fixture(scope="session")
def make_config():
    return tiny_config


@pytest.fixture(autouse=True)
def _one_thread():
    """The tiny model is overhead-bound: one thread is ~10x faster than two on a shared 2-core box."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
