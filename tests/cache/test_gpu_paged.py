"""GPU: the paged INT2 path (kernels + CUDA-graph decode) equals the reference OscarCache path on
random-weight Llama / Qwen2 / Qwen3 configs (bf16). Skipped without CUDA.

Tolerance: bf16 models. The reference path dequantizes the history to bf16 and runs SDPA; the kernels
read the codes in fp16 and accumulate in fp32, so logits differ by bf16 rounding of the attention
output. Measured on the H200 (2026-12-03, run 4 of this session): the prefill step, where neither path
has quantized anything yet (two bf16 SDPA calls: masked vs is_causal), already differs by 1.1% of
max |logit|; decode steps by up to 1.7% (Llama, Qwen2) and 2.5% (Qwen3). We require
max |logit difference| <= 0.04 * max |logit| per step (0.08 with R_V folded into the weights, see
test_graph_paged_equals_reference_128_tokens) and greedy tokens equal over 128 generated
tokens, except at a near-tie (the reference's top-2 margin <= 2x the measured logit difference; bf16
logits of random models tie exactly, margin 0.0, which is what was seen), which is reported."""

import json
import os
from dataclasses import replace

import pytest
import torch

from oscarkv.cache import OscarCache
from oscarkv.cache.graph import generate as graph_generate
from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention
from oscarkv.rotation import RotationSet, config_hash
from tinymodels import left_pad, oscar_generate

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
NEW = 128
LOG = os.environ.get("OSCAR_GPU_TEST_LOG")


def _config(kind):
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    common = dict(hidden_size=1024, num_attention_heads=8, num_key_value_heads=2, num_hidden_layers=4,
                  intermediate_size=2048, vocab_size=512, max_position_embeddings=4096)
    if kind == "llama":
        return LlamaConfig(head_dim=128, **common)
    if kind == "qwen2":
        return Qwen2Config(**common)  # head_dim = 1024 / 8 = 128, q/k/v biases
    return Qwen3Config(head_dim=128, **common)  # q/k norms


def _model(cfg):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with torch.device("cuda"):
        return AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()


def _rotations(cfg, seed=0):
    g = torch.Generator().manual_seed(seed)
    n, d = cfg.num_hidden_layers, 128
    orth = lambda: torch.linalg.qr(torch.randn(n, 1, d, d, generator=g))[0]  # noqa: E731
    return RotationSet(k_rotation=orth(), v_rotation=orth(), k_clip=torch.full((n,), 0.96), v_clip=torch.full((n,), 0.92),
                       meta={"model_id": "random", "config_hash": config_hash(cfg)})


KW = dict(sink=16, recent=64, group_size=128)


def _log(rec):
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps(rec) + "\n")


def _compare(name, want_toks, want_logits, got_toks, got_logits, tol=0.04):
    diffs, first_bad, margin = [], None, None
    for i in range(len(want_logits)):
        a, b = want_logits[i].float(), got_logits[i].float()
        diffs.append(float((a - b).abs().max() / a.abs().max()))
        if first_bad is None and not torch.equal(want_toks[:, i], got_toks[:, i]):
            first_bad = i
            top2 = a.topk(2, dim=-1).values
            margin = float((top2[:, 0] - top2[:, 1]).min())
            break
    rec = {"test": name, "steps_compared": len(diffs), "max_rel_logit_diff": max(diffs), "first_divergence": first_bad,
           "ref_margin_at_divergence": margin}
    _log(rec)
    print(rec)
    assert max(diffs) <= tol, rec
    if first_bad is not None:  # only a near-tie may flip the greedy token
        abs_diff = float((want_logits[first_bad].float() - got_logits[first_bad].float()).abs().max())
        assert margin <= 2 * abs_diff, rec


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_graph_paged_equals_the_int8_query_reference_128_tokens(kind):
    """The paged CUDA path against the reference backend with the kernel's int8 query on the INT2 history
    ("+q8", fifteenth session): the same method, rotations and rounding of q, so what is left is bf16 SDPA
    against the kernel's fp32 accumulation. Same bound as the comparison with the plain reference below (not yet
    measured on a GPU when written; the log records the number)."""
    cfg = _config(kind)
    model = _model(cfg)
    rot = _rotations(cfg)
    ids = torch.randint(1, 512, (1, 300), generator=torch.Generator().manual_seed(1)).cuda()
    paged = OscarCache(cfg, "oscar", rotations=rot, max_tokens=512, **KW)
    enable_oscar_attention(model, paged)
    try:
        toks, logits = graph_generate(model, paged, ids, max_new_tokens=NEW, return_logits=True)
    finally:
        disable_oscar_attention(model)
    ref = OscarCache(cfg, replace(paged.method, query="int8"), rotations=rot, backend="reference")
    out = oscar_generate(model, ref, ids, max_new_tokens=NEW)
    assert ref.segments()["quantized"] > 0
    _compare(f"{kind} graph paged vs int8-query reference", out.sequences[:, 300:], out.logits, toks, logits)


# absorb: R_V folded into the weights (paged: v_proj and o_proj; reference: o_proj). The folds change bf16
# rounding, which these random bf16 models amplify: measured on the H200 (2026-12-03c, bench/diag_gpu_paged.py,
# Qwen3, 24 steps) the reference with its fold moves 2.9% from the reference without; the paged path with both
# folds moves up to 6.3% from the unfolded reference with every kernel backend (CUDA, Triton, torch alike),
# while without the folds the paged path stays within 1.3% (CUDA) / 1.3% (Triton). So kernels are checked
# without the folds at 4%, and the folded path against the folded reference at 8%. Re-measured with this test
# (2026-12-03c, call C): no folds 1.1% / 1.3% / 1.7% (Llama / Qwen2 / Qwen3), folds 3.2% / 3.6% / 5.6%.
@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_graph_paged_equals_reference_128_tokens(kind, absorb):
    cfg = _config(kind)
    model = _model(cfg)
    rot = _rotations(cfg)
    ids = torch.randint(1, 512, (1, 300), generator=torch.Generator().manual_seed(1)).cuda()
    paged = OscarCache(cfg, "oscar", rotations=rot, max_tokens=512, **KW)
    enable_oscar_attention(model, paged, absorb_v_into_o_proj=absorb)
    assert paged.paged is not None, "the device should pick the paged backend"
    try:
        toks, logits = graph_generate(model, paged, ids, max_new_tokens=NEW, return_logits=True)
    finally:
        disable_oscar_attention(model)
    out = oscar_generate(model, OscarCache(cfg, paged.method, rotations=rot, backend="reference"), ids,
                         absorb=absorb, max_new_tokens=NEW)
    assert paged.segments()["quantized"] > 0
    _compare(f"{kind} graph paged vs reference (absorb={absorb})", out.sequences[:, 300:], out.logits, toks, logits,
             tol=0.08 if absorb else 0.04)


@pytest.mark.parametrize("compile", [False, True])
def test_centered_absorbed_graph_equals_reference(compile):
    """Calibrated means (oscar+center) on Qwen2 (q/k/v biases, where the means matter), R_V folded: mu_V's share
    of the output lives in o_proj's bias (value_mean_bias) on both paths; the graph step (compiled or not) against
    the reference, same bound as the folded comparison above."""
    cfg = _config("qwen2")
    model = _model(cfg)
    rot = _rotations(cfg)
    g = torch.Generator().manual_seed(9)
    n, h, d = cfg.num_hidden_layers, cfg.num_key_value_heads, 128
    rot.k_mean, rot.v_mean = 0.5 * torch.randn(n, h, d, generator=g), 0.5 * torch.randn(n, h, d, generator=g)
    ids = torch.randint(1, 512, (1, 300), generator=torch.Generator().manual_seed(1)).cuda()
    paged = OscarCache(cfg, "oscar+center", rotations=rot, max_tokens=512, **KW)
    enable_oscar_attention(model, paged, absorb_v_into_o_proj=True)
    assert paged.paged is not None and model.model.layers[0].self_attn._oscar_attention.mean_in_bias
    try:
        toks, logits = graph_generate(model, paged, ids, max_new_tokens=NEW, return_logits=True, compile=compile)
    finally:
        disable_oscar_attention(model)
    out = oscar_generate(model, OscarCache(cfg, paged.method, rotations=rot, backend="reference"), ids,
                         absorb=True, max_new_tokens=NEW)
    _compare(f"qwen2 centered graph paged (compile={compile}) vs reference (absorb)", out.sequences[:, 300:],
             out.logits, toks, logits, tol=0.08)


def test_padded_batch_and_absorption_on_gpu():
    cfg = _config("qwen3")
    model = _model(cfg)
    rot = _rotations(cfg)
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(1, 512, (1, n), generator=g).cuda() for n in (200, 97, 150)]
    ids, mask = (t.cuda() for t in left_pad([p.cpu() for p in prompts]))
    cache = OscarCache(cfg, "oscar", rotations=rot, max_tokens=512, **KW)
    enable_oscar_attention(model, cache, absorb_v_into_o_proj=False)
    try:
        toks, logits = graph_generate(model, cache, ids, mask, max_new_tokens=64, return_logits=True)
    finally:
        disable_oscar_attention(model)
    # each row against the same prompt alone through the reference: with the kernel's int8 query and no fold (the
    # padding property, at the kernels' 4%), and exact with R_V folded into o_proj (the two R_V options, at the 8%
    # of the folds above: 2026-12-05 measured 4.8% for row 1 here, where the fold alone moves the reference 2.9%)
    for b, p in enumerate(prompts):
        for method, absorb, tol in ((replace(cache.method, query="int8"), False, 0.04), (cache.method, True, 0.08)):
            ref = OscarCache(cfg, method, rotations=rot, backend="reference")
            enable_oscar_attention(model, ref, absorb_v_into_o_proj=absorb)
            try:
                out = model.generate(p, cache=ref, max_new_tokens=64, do_sample=False, output_logits=True,
                                     return_dict_in_generate=True, pad_token_id=0)
            finally:
                disable_oscar_attention(model)
            what = "int8-query reference" if not absorb else "reference, R_V absorbed"
            _compare(f"qwen3 padded row {b} (explicit R_V) vs alone ({what})", out.sequences[:, p.shape[1]:],
                     out.logits, toks[b:b + 1], [x[b:b + 1] for x in logits], tol=tol)


def test_sampling_runs_and_eager_generate_equals_graph():
    cfg = _config("llama")
    model = _model(cfg)
    ids = torch.randint(1, 512, (2, 120), generator=torch.Generator().manual_seed(4)).cuda()
    gen = torch.Generator(device="cuda").manual_seed(0)
    c = OscarCache(cfg, "hadamard", max_tokens=400, **KW)
    enable_oscar_attention(model, c)
    try:
        toks = graph_generate(model, c, ids, max_new_tokens=32, do_sample=True, top_k=50, generator=gen)
    finally:
        disable_oscar_attention(model)
    assert toks.shape == (2, 32)
    a = OscarCache(cfg, "hadamard", max_tokens=400, **KW)
    enable_oscar_attention(model, a)
    try:
        want = model.generate(ids, attention_mask=torch.ones_like(ids), cache=a, max_new_tokens=32, do_sample=False,
                              output_logits=True, return_dict_in_generate=True, pad_token_id=0)
    finally:
        disable_oscar_attention(model)
    b = OscarCache(cfg, "hadamard", max_tokens=400, **KW)
    enable_oscar_attention(model, b)
    try:
        got, logits = graph_generate(model, b, ids, max_new_tokens=32, return_logits=True)
    finally:
        disable_oscar_attention(model)
    _compare("llama eager model.generate (paged) vs graph loop", want.sequences[:, 120:], want.logits, got, logits)


def test_beam_search_on_the_cuda_kernels():
    """Beam search (model.generate(num_beams=...)) on the tile16 pools and the CUDA kernels: rows reordered by
    copying blocks (PagedState.copy_rows). Exact property: after row 1 takes row 0's blocks, the same next
    token gives both rows bit-equal logits (the same kernels over the same bytes); beam search then runs."""
    cfg = _config("qwen3")
    model = _model(cfg)
    rot = _rotations(cfg)
    ids = torch.randint(1, 512, (2, 300), generator=torch.Generator().manual_seed(6)).cuda()
    c = OscarCache(cfg, "oscar", rotations=rot, max_tokens=512, **KW)
    enable_oscar_attention(model, c)
    try:
        model.generate(ids, attention_mask=torch.ones_like(ids), cache=c, max_new_tokens=40, do_sample=False,
                       pad_token_id=0)
        assert c.paged.layout == "tile16" and c.segments()["quantized"] > 0
        n = c.get_seq_length()
        c.reorder_cache(torch.tensor([0, 0], device="cuda"))
        mask = torch.ones(2, n + 1, dtype=torch.long, device="cuda")
        with torch.no_grad():
            lg = model(torch.full((2, 1), 7, device="cuda"), attention_mask=mask, cache=c,
                       cache_position=torch.tensor([n], device="cuda")).logits
        assert torch.equal(lg[0], lg[1])
    finally:
        disable_oscar_attention(model)
    b = OscarCache(cfg, "oscar", rotations=rot, max_tokens=512, **KW)
    out = oscar_generate(model, b, ids[:1], num_beams=3, max_new_tokens=32, output_logits=False, output_scores=True)
    assert b.paged.layout == "tile16"
    assert out.sequences.shape == (1, 332) and torch.isfinite(out.sequences_scores).all()


def test_reset_cache_graph_generate_equals_a_new_cache():
    """A reset paged cache (new pools, a new captured graph) serves the next prompt as a new cache does."""
    cfg = _config("llama")
    model = _model(cfg)
    rot = _rotations(cfg)
    a = torch.randint(1, 512, (2, 200), generator=torch.Generator().manual_seed(7)).cuda()
    b = torch.randint(1, 512, (3, 150), generator=torch.Generator().manual_seed(8)).cuda()
    c = OscarCache(cfg, "oscar", rotations=rot, max_tokens=400, **KW)
    enable_oscar_attention(model, c)
    try:
        graph_generate(model, c, a, max_new_tokens=32)
        c.reset()
        got, got_logits = graph_generate(model, c, b, max_new_tokens=32, return_logits=True)
    finally:
        disable_oscar_attention(model)
    n = OscarCache(cfg, "oscar", rotations=rot, max_tokens=400, **KW)
    enable_oscar_attention(model, n)
    try:
        want, want_logits = graph_generate(model, n, b, max_new_tokens=32, return_logits=True)
    finally:
        disable_oscar_attention(model)
    assert torch.equal(got, want)
    assert all(torch.equal(x, y) for x, y in zip(got_logits, want_logits))


def test_graph_with_torch_kernels_is_refused_in_one_line():
    """The torch reference syncs with the host: capturing it must be refused before capture starts (a failed
    capture leaves the CUDA generator unusable for the rest of the process); eager still works."""
    from oscarkv.errors import InputError

    cfg = _config("llama")
    model = _model(cfg)
    ids = torch.randint(1, 512, (1, 40), generator=torch.Generator().manual_seed(4)).cuda()
    cache = OscarCache(cfg, "oscar", rotations=_rotations(cfg), max_tokens=128, kernel_backend="torch", **KW)
    enable_oscar_attention(model, cache)
    try:
        with pytest.raises(InputError, match="kernel_backend='torch'"):
            graph_generate(model, cache, ids, max_new_tokens=4, use_graph=True)
        cache2 = OscarCache(cfg, "oscar", rotations=_rotations(cfg), max_tokens=128, kernel_backend="torch", **KW)
        enable_oscar_attention(model, cache2)
        assert graph_generate(model, cache2, ids, max_new_tokens=4).shape == (1, 4)  # default: eager
        torch.randn(3, device="cuda")  # the generator still works
    finally:
        disable_oscar_attention(model)


def test_graph_step_per_page_bucket_equals_eager():
    """The graph step keeps one graph per page-view bucket (PagedState.page_buckets: the step's demoted pages,
    padded with null pages to 0, 1, 2, 4 or the whole table). Rows of different lengths demote on different
    steps, so the steps replay several of them; each step's logits equal the same step run eagerly on the same
    buffers (same kernels, same bytes: equal up to the eager / replayed launch order, 1e-3 here)."""
    from oscarkv.cache.graph import GraphDecoder, _cache_kwarg

    cfg = _config("qwen3")
    model = _model(cfg)
    rot = _rotations(cfg)
    g = torch.Generator().manual_seed(9)
    lens = (197, 97, 150, 181, 133)  # 197, 181 and 133 demote at once (3 pages: bucket 4), the others alone
    ids, mask = (t.cuda() for t in left_pad([torch.randint(1, 512, (1, m), generator=g) for m in lens]))
    feed = torch.randint(1, 512, (48, len(lens)), generator=torch.Generator().manual_seed(3)).cuda()
    logits, buckets = {}, {}
    for use_graph in (False, True):
        c = OscarCache(cfg, "oscar", rotations=rot, max_tokens=512, **KW)
        enable_oscar_attention(model, c)
        try:
            c.set_padding(mask)
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.no_grad():
                model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **{_cache_kwarg(model): c})
            dec = GraphDecoder(model, c, use_graph=use_graph)
            out, seen = [], []
            for i in range(feed.shape[0]):
                out.append(dec.step(feed[i]).float().clone())
                seen.append(c.paged.page_bucket)
            logits[use_graph], buckets[use_graph] = torch.stack(out), seen
            if use_graph:
                assert sorted(dec.graphs) == c.paged.page_buckets() == [0, 1, 2, 4, 5]
        finally:
            disable_oscar_attention(model)
    assert buckets[False] == buckets[True] and {0, 1, 4} <= set(buckets[True]), buckets
    a, b = logits[False], logits[True]
    diffs = [float((a[i] - b[i]).abs().max() / a[i].abs().max()) for i in range(a.shape[0])]
    rec = {"test": "graph step per page bucket vs eager", "buckets": sorted(set(buckets[True])), "max_rel_logit_diff": max(diffs)}
    _log(rec)
    print(rec)
    assert max(diffs) <= 1e-3, rec


def _with_log8_tops(model, cfg, rot, ids):
    """``rot`` plus log8 scale tops measured on this model's rotated K / V rows of ``ids`` (as calibrate does:
    quant.log8_top under the layer's clip, calibrate's headroom)."""
    from transformers import DynamicCache

    from oscarkv.calibrate.core import SCALE_TOP_HEADROOM
    from oscarkv.quant import QuantConfig, log8_top
    from oscarkv.rotation import rotate

    c = DynamicCache()
    with torch.no_grad():
        model(ids, cache=c)
    tops = {"k": [], "v": []}
    for i, layer in enumerate(c.layers):
        for kind, x, clip in (("k", layer.keys, 0.96), ("v", layer.values, 0.92)):
            xr = rotate(x.float().cpu(), rot.rotation(kind, i))
            tops[kind].append(log8_top(xr, QuantConfig(group_size=128, clip_ratio=clip), SCALE_TOP_HEADROOM))
    return replace(rot, k_scale_top=torch.tensor(tops["k"], dtype=torch.float32),
                   v_scale_top=torch.tensor(tops["v"], dtype=torch.float32))


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_graph_paged_log8_equals_reference_128_tokens(kind):
    """scale_dtype="log8" (forty-eighth session; not yet run on a GPU when written): the paged cache allocates log8
    tile16 records, appends and decodes them with the CUDA kernels inside the CUDA-graph step, against the reference
    backend with the same format and rotations, as the fp16 records above."""
    cfg = _config(kind)
    model = _model(cfg)
    ids = torch.randint(1, 512, (1, 300), generator=torch.Generator().manual_seed(1)).cuda()
    rot = _with_log8_tops(model, cfg, _rotations(cfg), ids)
    paged = OscarCache(cfg, "oscar", rotations=rot, max_tokens=512, scale_dtype="log8", **KW)
    enable_oscar_attention(model, paged)
    try:
        toks, logits = graph_generate(model, paged, ids, max_new_tokens=NEW, return_logits=True)
    finally:
        disable_oscar_attention(model)
    pool = paged.paged.pools[0]
    assert pool.layout == "tile16" and pool.k_scale.dtype == torch.uint8 and pool.k_codes.stride(1) == 8 * 128 + 64
    out = oscar_generate(model, OscarCache(cfg, paged.method, rotations=rot, backend="reference"), ids,
                         max_new_tokens=NEW)
    assert paged.segments()["quantized"] > 0
    _compare(f"{kind} graph paged log8 vs reference", out.sequences[:, 300:], out.logits, toks, logits)
