"""Shared builders and fixtures for the adversarial tests (no conftest.py here: tests/kernels imports
``from conftest import ...``, which another conftest module would shadow)."""

import pytest
import torch
from transformers import LlamaConfig

from oscarkv.rotation import RotationSet, config_hash, hadamard


def tiny_config(layers=2, **kw):
    base = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_hidden_layers=layers,
                intermediate_size=64, vocab_size=100)
    base.update(kw)
    return LlamaConfig(**base)


def good_rotations(layers=2, d=32, per_head=False, levels=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = 2 if per_head else 1
    orth = lambda: torch.linalg.qr(torch.randn(layers, r, d, d, generator=g, dtype=torch.float64))[0].float()  # noqa: E731
    kw = {}
    if levels:
        kw = dict(k_levels=torch.tensor([[0.0, 0.9, 2.1, 3.0]] * layers), v_levels=torch.tensor([[0.0, 1.1, 1.9, 3.0]] * layers))
    return RotationSet(k_rotation=orth(), v_rotation=orth(), k_eigenvalues=torch.rand(layers, r, d),
                       v_eigenvalues=torch.rand(layers, r, d), k_clip=torch.full((layers,), 0.96),
                       v_clip=torch.full((layers,), 0.92),
                       meta={"model_id": "tiny", "config_hash": config_hash(tiny_config(layers)), "num_layers": layers,
                             "head_dim": d, "bits": 2}, **kw)



def tiny_checkpoint(d, max_positions=2048):
    """A random 2-layer Llama + a small BPE tokenizer saved as a transformers checkpoint folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    from oscarkv.data import builtin_text

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([builtin_text("pydoc-calib")[:100_000]], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(d)
    torch.manual_seed(0)
    cfg = tiny_config(vocab_size=len(fast), max_position_embeddings=max_positions)
    LlamaForCausalLM(cfg).save_pretrained(d)
    return d


@pytest.fixture
def cfg():
    return tiny_config()


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models are overhead-bound: one thread is faster on the shared 2-core machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
