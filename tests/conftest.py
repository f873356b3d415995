"""Fixtures every test folder shares: one torch thread, the tiny random decoder and its rotations.

Test folders are not packages, so helpers reach tests as fixtures: ``make_config`` / ``tiny`` return
the builders below, ``config`` / ``model`` / ``rotations`` are the session-wide default instances.
"""

import pytest
import torch

from oscarkv.rotation import RotationSet, config_hash

_FAMILIES = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
             "qwen3": ("Qwen3Config", "Qwen3ForCausalLM")}


def tiny_config(layers: int = 2, kind: str = "llama", head_dim: int = 32, hidden_size: int = 128, **overrides):
    """Random-init decoder config: 2 layers, hidden 128, 4 query heads, 2 KV heads, head_dim 32."""
    import transformers as tf

    kw = dict(num_hidden_layers=layers, hidden_size=hidden_size, num_attention_heads=4, num_key_value_heads=2,
              head_dim=head_dim, intermediate_size=64, vocab_size=100)
    return getattr(tf, _FAMILIES[kind][0])(**{**kw, **overrides})


def tiny_model(kind: str = "llama", layers: int = 2, seed: int = 0, head_dim: int = 32, **overrides):
    """``tiny_config(...)`` as a model in eval mode, weights from ``torch.manual_seed(seed)``."""
    import transformers as tf

    cfg = tiny_config(layers, kind, head_dim, **overrides)
    torch.manual_seed(seed)
    return getattr(tf, _FAMILIES[kind][1])(cfg).eval()


def random_rotations(config, per_head=False, seed=0):
    """Random orthogonal R_K / R_V per layer (a stand-in for calibrated OSCAR rotations)."""
    g = torch.Generator().manual_seed(seed)
    n, d = config.num_hidden_layers, config.head_dim
    r = config.num_key_value_heads if per_head else 1
    orth = lambda: torch.linalg.qr(torch.randn(n, r, d, d, generator=g))[0]  # noqa: E731
    return RotationSet(k_rotation=orth(), v_rotation=orth(),
                       k_clip=torch.full((n,), 0.96), v_clip=torch.full((n,), 0.92),
                       meta={"model_id": "tiny", "config_hash": config_hash(config)})


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
