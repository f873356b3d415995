import pytest
import torch


def tiny_model(kind: str = "llama", layers: int = 2, seed: int = 0, head_dim: int = 32):
    """Random-init decoder: 2 layers, hidden 128, 4 query heads, 2 KV heads, head_dim 32."""
    import transformers as tf

    cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM), "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
           "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM)}[kind]
    cfg = cls[0](num_hidden_layers=layers, hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=head_dim, intermediate_size=64, vocab_size=100)
    torch.manual_seed(seed)
    return cls[1](cfg).eval()


@pytest.fixture
def tiny():
    return tiny_model


@pytest.fixture
def ids():
    return torch.randint(0, 100, (320,), generator=torch.Generator().manual_seed(1))


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: thread start-up dominates, and the box is shared (one thread is ~10x faster)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
