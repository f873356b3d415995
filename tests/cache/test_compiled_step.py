"""The compiled decode step (``GraphDecoder(compile=True)``, cache/ops.py): the paged append + INT2
attention is one opaque custom op ``oscarkv::paged_decode`` with a fake implementation, and
``torch.compile`` (inductor) takes the rest of the model.

CPU (CI): the op passes ``torch.library.opcheck``; the compiled step (torch reference kernels, inductor's
C++ backend, needs a C++ compiler) equals the uncompiled step and does not recompile after its second
step (what the CUDA-graph capture relies on). GPU (skipped without CUDA): compiled + CUDA graph vs the
uncompiled CUDA graph, same tokens fed to both (teacher forcing), bf16 random Qwen3."""

import json
import os
import shutil

import pytest
import torch

from oscarkv.cache import OscarCache
from oscarkv.cache.graph import GraphDecoder, generate
from oscarkv.errors import StateError
from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention
from tinymodels import left_pad, oscar_generate

KW = dict(sink=16, recent=16, group_size=32)
needs_cc = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None and shutil.which("gcc") is None,
                              reason="inductor's CPU backend needs a C++ compiler")


def _prompts(lengths=(40, 23, 33), seed=5):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, 100, (1, n), generator=g) for n in lengths]


def _prefilled(model, config, rotations, ids, mask=None, **kw):
    c = OscarCache(config, "oscar", rotations=rotations, backend="paged", max_tokens=96, **KW, **kw)
    enable_oscar_attention(model, c, absorb_v_into_o_proj=True)
    c.set_padding(mask)
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, cache=c, use_cache=True)
    return c


def _assert_equals_greedy_generate(model, cache, ids, toks, logits, n=10):
    """``toks`` / ``logits`` of a compiled step == ``model.generate`` (greedy) through ``cache``."""
    want = oscar_generate(model, cache, ids, max_new_tokens=n)
    assert torch.equal(toks, want.sequences[:, ids.shape[1]:])
    assert max((a - b).abs().max() for a, b in zip(logits, want.logits)) < 1e-4


def test_paged_decode_op_passes_opcheck(model, config, rotations):
    from oscarkv.cache import ops

    ids = _prompts((40,))[0]  # 40 + 1 tokens: the decode step demotes nothing, so re-running it is idempotent
    c = _prefilled(model, config, rotations, ids)
    try:
        st = c.paged
        st.handle = ops.register(st)
        st.make_static()
        st.begin_forward(1)
        g = torch.Generator().manual_seed(0)
        hq, hkv, d = config.num_attention_heads, config.num_key_value_heads, config.head_dim
        q, k, v = (torch.randn(1, h, d, generator=g) for h in (hq, hkv, hkv))
        args = (q, k, v, st.handle, 1, d ** -0.5)
        torch.library.opcheck(torch.ops.oscarkv.paged_decode.default, args)
        out = torch.ops.oscarkv.paged_decode(*args)
        assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()

        class Gone:
            pass

        gone = ops.register(Gone())  # its state is collected at once: the handle names nothing
        with pytest.raises(StateError, match="no longer exists"):
            torch.ops.oscarkv.paged_decode(q, k, v, gone, 1, d ** -0.5)
    finally:
        disable_oscar_attention(model)


@needs_cc
def test_compiled_step_equals_uncompiled_and_does_not_recompile(model, config, rotations):
    """Left-padded batch of 3, 12 steps (page demotions included): compiled == uncompiled logits; from
    the third step on no recompilation (``fail_on_recompile``), as the CUDA-graph capture requires."""
    ids, mask = left_pad(_prompts())
    runs = {}
    for comp in (False, True):
        c = _prefilled(model, config, rotations, ids, mask)
        try:
            dec = GraphDecoder(model, c, use_graph=False, compile=comp)
            tok = torch.ones(ids.shape[0], dtype=torch.long)
            logits = []
            for i in range(12):
                stance = torch.compiler.set_stance("fail_on_recompile") if comp and i >= 2 else torch.no_grad()
                with stance:
                    lg = dec.step(tok)
                logits.append(lg.clone())
                tok = lg.argmax(-1)
        finally:
            disable_oscar_attention(model)
        runs[comp] = torch.stack(logits)
    assert (runs[True] - runs[False]).abs().max() < 1e-4


@needs_cc
def test_compiled_generate_explicit_v_rotation_equals_generate(model, config, rotations):
    """``graph.generate(..., compile=True)`` with R_V unrotated per head (not absorbed) == model.generate."""
    ids = _prompts((40,))[0]
    c = OscarCache(config, "oscar", rotations=rotations, backend="paged", max_tokens=96, **KW)
    enable_oscar_attention(model, c, absorb_v_into_o_proj=False)
    try:
        toks, logits = generate(model, c, ids, max_new_tokens=10, use_graph=False, compile=True, return_logits=True)
    finally:
        disable_oscar_attention(model)
    c2 = OscarCache(config, "oscar", rotations=rotations, backend="paged", max_tokens=96, **KW)
    _assert_equals_greedy_generate(model, c2, ids, toks, logits)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_compiled_graph_equals_uncompiled_graph():
    """bf16 random Qwen3 (head_dim 128: the CUDA kernels' tile16 pools), batch 2 left-padded: the
    compiled + captured step vs the uncompiled captured step, the same tokens fed to both for 48 steps
    (three page demotions). Tolerance: bf16 rounding differs where inductor fuses (RMSNorm, RoPE, casts):
    max |logit diff| <= 2% of max |logit| per step (the GPU tests' rule for two bf16 paths is 4%)."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    cfg = Qwen3Config(hidden_size=1024, num_attention_heads=8, num_key_value_heads=2, num_hidden_layers=4, head_dim=128,
                      intermediate_size=2048, vocab_size=512, max_position_embeddings=4096)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    from oscarkv.rotation import RotationSet, config_hash

    g = torch.Generator().manual_seed(0)
    orth = lambda: torch.linalg.qr(torch.randn(4, 1, 128, 128, generator=g))[0]  # noqa: E731
    rot = RotationSet(k_rotation=orth(), v_rotation=orth(), k_clip=torch.full((4,), 0.96), v_clip=torch.full((4,), 0.92),
                      meta={"model_id": "random", "config_hash": config_hash(cfg)})
    ids = torch.randint(1, 512, (2, 200), generator=torch.Generator().manual_seed(1)).cuda()
    feed = torch.randint(1, 512, (48, 2), generator=torch.Generator().manual_seed(2)).cuda()
    mask = torch.ones_like(ids)
    mask[1, :37] = 0
    logits = {}
    for comp in (False, True):  # one after the other: the model's attention follows the enabled cache
        c = OscarCache(cfg, "oscar", rotations=rot, sink=16, recent=64, group_size=128, max_tokens=512)
        enable_oscar_attention(model, c, absorb_v_into_o_proj=True)
        try:
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.no_grad():
                model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=c, use_cache=True)
            dec = GraphDecoder(model, c, compile=comp)
            logits[comp] = torch.stack([dec.step(feed[i]).float().clone() for i in range(feed.shape[0])])
            assert dec.graph is not None
        finally:
            disable_oscar_attention(model)
    a, b = logits[False], logits[True]
    diffs = [float((a[i] - b[i]).abs().max() / a[i].abs().max()) for i in range(a.shape[0])]
    rec = {"test": "gpu_compiled_graph_vs_graph", "steps": len(diffs), "max_rel_logit_diff": max(diffs),
           "mean_rel_logit_diff": sum(diffs) / len(diffs)}
    print(rec)
    if os.environ.get("OSCAR_GPU_TEST_LOG"):
        with open(os.environ["OSCAR_GPU_TEST_LOG"], "a") as f:
            f.write(json.dumps(rec) + "\n")
    assert max(diffs) <= 0.02, rec


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_fused_projections_equal_separate(kind):
    """``fuse_projections``: q/k/v_proj and gate/up_proj as one GEMM each; same logits, same state_dict
    keys, and ``unfuse_projections`` restores plain nn.Linear modules."""
    from oscarkv.integrations.transformers import FusedSiblingLinear, fuse_projections, unfuse_projections
    from tinymodels import tiny_model

    m = tiny_model(kind)
    ids = torch.randint(1, 100, (2, 9), generator=torch.Generator().manual_seed(0))
    keys = set(m.state_dict())
    with torch.no_grad():
        want = m(ids).logits
        assert fuse_projections(m) == 2 * m.config.num_hidden_layers
        assert set(m.state_dict()) == keys
        got = m(ids).logits
        assert unfuse_projections(m) == 5 * m.config.num_hidden_layers
        back = m(ids).logits
    assert not any(isinstance(x, FusedSiblingLinear) for x in m.modules())
    assert (got - want).abs().max() < 1e-5 and torch.equal(back, want)


@needs_cc
def test_compiled_step_with_fused_projections(config, rotations):
    """The compiled paged step on a model with fused projections == the uncompiled step without them,
    inductor runs one GEMM per fused group (4 per layer + lm_head instead of 7 + 1), and no rotation GEMM:
    q and k reach the op unrotated, R_K is applied inside the append (write_kv(..., rotation=); before, one
    bmm per layer)."""
    from torch._inductor.utils import run_and_get_code

    from oscarkv.integrations.transformers import fuse_projections
    from tinymodels import tiny_model

    ids = _prompts((40,))[0]
    out = {}
    for fused in (False, True):
        m = tiny_model()
        if fused:
            fuse_projections(m)
        c = _prefilled(m, config, rotations, ids)
        try:
            dec = GraphDecoder(m, c, use_graph=False, compile=fused)
            tok = torch.ones(1, dtype=torch.long)
            logits = []
            for i in range(6):
                if fused and i == 0:
                    lg, code = run_and_get_code(dec.step, tok)
                else:
                    lg = dec.step(tok)
                logits.append(lg.clone())
                tok = lg.argmax(-1)
        finally:
            disable_oscar_attention(m)
        out[fused] = torch.stack(logits)
    assert (out[True] - out[False]).abs().max() < 1e-4
    n_mm = sum(c.count("extern_kernels.mm(") + c.count("extern_kernels.addmm(") for c in code)
    assert n_mm == 4 * config.num_hidden_layers + 1, n_mm
    assert not any("extern_kernels.bmm(" in c for c in code)


@needs_cc
@pytest.mark.parametrize("kind,per_head", [("qwen2", False), ("llama", True)])
def test_compiled_folded_rotations_equal_reference(kind, per_head):
    """The compiled step's folds: R_V in v_proj (+ its bias for Qwen2's biased v_proj), R_V^T in o_proj,
    q and k rotated in one GEMV (per-head rotations: one matrix per head of cat([q, k])) == the reference
    cache (backend "reference", nothing folded) with the same method and page."""
    from tinymodels import random_rotations, tiny_config, tiny_model

    cfg, m = tiny_config(kind=kind), tiny_model(kind)
    rot = random_rotations(cfg, per_head=per_head)
    ids = _prompts((40,))[0]
    c = OscarCache(cfg, "oscar", rotations=rot, backend="paged", max_tokens=96, **KW)
    enable_oscar_attention(m, c, absorb_v_into_o_proj=True)
    try:
        assert all(layer.v_folded for layer in c.layers)
        toks, logits = generate(m, c, ids, max_new_tokens=10, use_graph=False, compile=True, return_logits=True)
    finally:
        disable_oscar_attention(m)
    assert not any(layer.v_folded for layer in c.layers)
    _assert_equals_greedy_generate(m, OscarCache(cfg, c.method, rotations=rot), ids, toks, logits)
