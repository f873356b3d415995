"""Real SmolLM2-135M (30 layers, 3 KV heads, head_dim 64) on ~2K tokens of pydoc-calib."""

import time

import pytest
import torch


def _logit_error(q, k, rot, cfg):
    """Mean squared error of q.k over all (query, key) pairs of each KV head's query group."""
    from oscarkv.quant import fake_quantize

    k_hat = torch.matmul(fake_quantize(torch.matmul(k, rot), cfg), rot.transpose(-1, -2))
    b, hq, t, d = q.shape
    qg = q.reshape(b, k.shape[1], hq // k.shape[1] * t, d)
    return (qg @ (k_hat - k).transpose(-1, -2)).pow(2).mean().item()


@pytest.mark.slow
def test_real_model_oscar_k_rotation_beats_hadamard_on_heldout(tmp_path):
    from oscarkv.calibrate import calibrate, capture_qkv
    from oscarkv.data import builtin_text, token_ids
    from oscarkv.models import load_model
    from oscarkv.quant import QuantConfig
    from oscarkv.rotation import RotationSet, hadamard

    lm = load_model("default")
    t0 = time.perf_counter()
    ids = token_ids(lm.tokenizer, builtin_text("pydoc-calib"), 2048)
    # per_head: on this model one shared rotation per layer (the paper's default) is ~3% *worse* than
    # plain Hadamard at group 64 (measured: 6108 vs 5901 summed logit MSE on held-out text), while one
    # rotation per KV head is ~20% better: its 3 KV heads have very different query statistics.
    rs = calibrate(lm.model, ids, seq_len=512, group_size=64, per_head=True, progress=False, model_id=lm.model_id)
    print(f"calibration: {time.perf_counter() - t0:.1f} s, k_clip {rs.k_clip.tolist()}, v_clip {rs.v_clip.tolist()}")
    back = RotationSet.load(rs.save(tmp_path / "smollm2.safetensors"), lm.model.config)
    assert back.k_rotation.shape == (30, 3, 64, 64)

    held = token_ids(lm.tokenizer, builtin_text("pydoc-eval"), 512)[None]
    h = hadamard(64, torch.float32)
    plain = QuantConfig(2, 64, None, "float16")
    err = {"oscar": 0.0, "hadamard": 0.0, "oscar+clip": 0.0}
    for layer, (q, k, _) in enumerate(capture_qkv(lm.model, held)):
        err["oscar"] += _logit_error(q, k, back.k_rotation[layer], plain)
        err["hadamard"] += _logit_error(q, k, h, plain)
        err["oscar+clip"] += _logit_error(q, k, back.k_rotation[layer], QuantConfig(2, 64, back.clip("k", layer)))
    print(err)
    assert err["oscar"] < 0.95 * err["hadamard"]
    assert err["oscar+clip"] < err["oscar"]  # fitted clip ratios carry over to held-out text
