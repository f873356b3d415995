"""The tiny random decoders the tests use, as a plain module: the fixtures in tests/conftest.py wrap
these, and test helpers that need them outside a fixture import them (tests/ is on sys.path)."""

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


def tiny_checkpoint(d, max_positions=2048, text_chars=100_000):
    """``tiny_model`` + a small BPE tokenizer (trained on pydoc-calib) saved as a checkpoint folder ``d``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from oscarkv.data import builtin_text

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([builtin_text("pydoc-calib")[:text_chars]], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(d)
    tiny_model(vocab_size=len(fast), max_position_embeddings=max_positions).save_pretrained(d)
    return d


def left_pad(prompts):
    """Prompts ``[1, n_i]`` -> (ids, mask) ``[B, max n]`` left-padded with token 0 / mask 0."""
    n = max(p.shape[1] for p in prompts)
    ids = torch.zeros(len(prompts), n, dtype=torch.long)
    mask = torch.zeros(len(prompts), n, dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, n - p.shape[1]:], mask[b, n - p.shape[1]:] = p[0], 1
    return ids, mask


def oscar_generate(model, cache, ids, mask=None, absorb=False, **gen):
    """``model.generate`` through ``cache`` with the OSCAR attention enabled (greedy, 20 new tokens, logits
    returned unless ``gen`` says otherwise); the attention is disabled again whatever happens."""
    from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention

    enable_oscar_attention(model, cache, absorb_v_into_o_proj=absorb)
    try:
        kw = dict(max_new_tokens=20, do_sample=False, output_logits=True, return_dict_in_generate=True, pad_token_id=0)
        kw.update(gen)
        return model.generate(ids, attention_mask=mask, cache=cache, **kw)
    finally:
        disable_oscar_attention(model)
