"""Calibration flags a model whose activations defeat token-wise INT2 (a large per-channel key offset,
as q/k/v biases give Qwen2 models) and stays quiet once the offset is centered away."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from oscarkv.calibrate import build_rotations, collect_stats, quality_warning


def test_key_offset_is_flagged_and_centering_fixes_it():
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32, num_hidden_layers=1,
                      intermediate_size=64, vocab_size=50, attention_bias=True)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # a large key bias on the slowest-rotating RoPE pair: a near-constant post-RoPE offset
        model.model.layers[0].self_attn.k_proj.bias[15] = 300.0
        model.model.layers[0].self_attn.k_proj.bias[31] = 300.0
        model.model.layers[0].self_attn.q_proj.bias.normal_(0, 3)
    ids = torch.randint(0, 50, (512,), generator=torch.Generator().manual_seed(1))
    st = collect_stats(model, ids, seq_len=128, sample_tokens=512, progress=False)
    plain = build_rotations(st, group_size=32)
    centered = build_rotations(st, group_size=32, center=True)
    rel_plain, rel_centered = max(plain.meta["relative_error"]["k"]), max(centered.meta["relative_error"]["k"])
    assert rel_centered < rel_plain
    assert quality_warning(centered, limit=rel_plain) is None
    msg = quality_warning(plain, limit=rel_centered * 1.01)
    assert msg is not None and "--plus" in msg and "\n" not in msg
