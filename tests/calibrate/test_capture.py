import pytest
import torch

from oscarkv.calibrate import attention_dims, calibrate, capture_attention, capture_qkv
from oscarkv.calibrate.capture import AttentionDims, check_all_layers


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_capture_shapes_and_unchanged_forward(tiny, kind):
    m = tiny(kind)
    ids = torch.randint(0, 100, (2, 12))
    ref = m(ids).logits
    impl = m.config._attn_implementation
    qkv = capture_qkv(m, ids)
    assert len(qkv) == 2
    q, k, v = qkv[1]
    assert q.shape == (2, 4, 12, 32) and k.shape == v.shape == (2, 2, 12, 32)
    assert m.config._attn_implementation == impl  # restored
    with capture_attention(m, lambda *a: None):
        out = m(ids, use_cache=False).logits
    torch.testing.assert_close(out, ref)


def test_qwen3_capture_is_post_norm_post_rope_and_raw_v(tiny):
    from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb

    m = tiny("qwen3")
    attn = m.model.layers[1].self_attn
    seen = {}
    attn.register_forward_pre_hook(lambda mod, a, kw: seen.update(kw), with_kwargs=True)
    ids = torch.randint(0, 100, (1, 10))
    q, k, v = capture_qkv(m, ids)[1]
    h = seen["hidden_states"]
    cos, sin = seen["position_embeddings"]
    shape = (1, 10, -1, 32)
    q_ref = attn.q_norm(attn.q_proj(h).view(shape)).transpose(1, 2)
    k_ref = attn.k_norm(attn.k_proj(h).view(shape)).transpose(1, 2)
    q_ref, k_ref = apply_rotary_pos_emb(q_ref, k_ref, cos, sin)
    v_ref = attn.v_proj(h).view(shape).transpose(1, 2)
    torch.testing.assert_close(q, q_ref.detach())
    torch.testing.assert_close(k, k_ref.detach())
    torch.testing.assert_close(v, v_ref.detach())


def test_capture_restores_on_error(tiny):
    m = tiny()

    def boom(*a):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        with capture_attention(m, boom):
            m(torch.zeros(1, 3, dtype=torch.long), use_cache=False)
    assert m.config._attn_implementation == "sdpa"


def test_clear_errors(tiny, ids):
    with pytest.raises(ValueError, match="power of two"):
        attention_dims(tiny(layers=1, hidden_size=96, num_attention_heads=2, num_key_value_heads=1, head_dim=48), power_of_two=True)
    with pytest.raises(ValueError, match="fewer than head_dim"):
        calibrate(tiny(), ids[:20], progress=False)
    with pytest.raises(ValueError, match="never reached"):
        check_all_layers({0}, AttentionDims(3, 4, 2, 32), tiny())

    class NoConfig(torch.nn.Module):
        config = object()

    with pytest.raises(ValueError, match="decoder-only"):
        attention_dims(NoConfig())
    with pytest.raises(ValueError, match="composition"):
        calibrate(tiny(), ids, composition="nope", progress=False)
    with pytest.raises(ValueError, match="group_size"):
        calibrate(tiny(), ids, group_size=24, progress=False)


def test_calibrate_refuses_model_with_invisible_attention(tiny, ids):
    m = tiny()
    m.model.layers[1].self_attn.forward = lambda hidden_states, **kw: (torch.zeros_like(hidden_states), None)
    with pytest.raises(ValueError, match=r"layers \[1\] never reached"):
        calibrate(m, ids, seq_len=64, progress=False)
