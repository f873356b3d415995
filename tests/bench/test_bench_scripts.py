"""The model-level benchmark scripts (bench/bench_model.py, bench/step_ablate.py) on the tiny config on CPU: a
device call is scarce, so a script that breaks on an API change must fail here, not on the GPU machine."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def run_script(name: str, tmp_path: Path, *args: str) -> dict:
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    r = subprocess.run([sys.executable, str(BENCH / f"{name}.py"), "--smoke", *args, "--out", str(out)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text())


def bench_module(name: str):
    """A bench script imported as a module (bench/ is not a package)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def bm():
    return bench_module("bench_model")


def test_equal_memory_batches_are_the_largest_that_fit(bm):
    cfg = bm.tiny_config()
    rot = bm.random_rotations(cfg, bm.dims(cfg)[2])
    budget, ctx = 2**25, 8192  # long enough that the BF16 windows (sink + recent) are a small part of a row
    eq = bm.equal_memory_batches(cfg, rot, ctx, budget)
    per_o, first = bm.oscar_row_bytes(cfg, rot, ctx)
    extra = first - per_o  # what the first row allocates beyond every other row (the null block)
    assert extra + eq["oscar_batch"] * per_o <= budget < extra + (eq["oscar_batch"] + 1) * per_o
    assert eq["bf16_batch"] * eq["bf16_bytes_per_row"] <= budget < (eq["bf16_batch"] + 1) * eq["bf16_bytes_per_row"]
    assert eq["oscar_batch"] > 2 * eq["bf16_batch"]  # INT2 rows are several times smaller
    capped = bm.equal_memory_batches(cfg, rot, ctx, budget, max_batch=3)
    assert (capped["oscar_batch"], capped["bf16_batch"]) == (3, min(3, eq["bf16_batch"]))


def test_force_decode_plan_sets_the_variant_of_every_plan(bm, monkeypatch):
    """--decode-variant: the paged cache's plans (built with CudaDecodeConfig(early_reads=True)) run the given
    variant and keep the rest of their config; checked on the config DecodePlan receives (no GPU here)."""
    from oscarkv.kernels import cuda_ops

    seen = []
    monkeypatch.setattr(cuda_ops.DecodePlan, "__init__", lambda self, *a, **k: seen.append((a, k)))
    bm.force_decode_plan(variant=4)
    cuda_ops.DecodePlan(59, 32, 8, 128, None, "cuda", torch.bfloat16, cuda_ops.CudaDecodeConfig(early_reads=True))
    cuda_ops.DecodePlan(1, 32, 8, 128, None, "cuda")
    (a1, _), (a2, _) = seen
    assert a1[:7] == (59, 32, 8, 128, None, "cuda", torch.bfloat16) and a2[:6] == (1, 32, 8, 128, None, "cuda")
    assert a1[7] == cuda_ops.CudaDecodeConfig(variant=4, early_reads=True)
    assert a2[7] == cuda_ops.CudaDecodeConfig(variant=4)


def test_force_decode_plan_scales_the_planned_int2_splits(bm, monkeypatch):
    """--decode-int2-split-scale: the plan is made as DecodePlan plans it, then again with its BF16-tier split
    count and its INT2 split count times the scale (rounded, >= 1); a plan without INT2 splits stays as it is."""
    from oscarkv.kernels import cuda_ops

    seen = []

    def fake(self, *a, n_hp_splits=None, n_int2_splits=None):
        seen.append((a[0], n_hp_splits, n_int2_splits))
        self.n_hp, self.n_int2 = (1, 4 if a[0] > 1 else 0) if n_hp_splits is None else (n_hp_splits, n_int2_splits)

    monkeypatch.setattr(cuda_ops.DecodePlan, "__init__", fake)
    bm.force_decode_plan(int2_split_scale=0.75)
    p = cuda_ops.DecodePlan(59, 32, 8, 128, None, "cuda", torch.bfloat16, cuda_ops.CudaDecodeConfig(early_reads=True))
    assert seen == [(59, None, None), (59, 1, 3)] and (p.n_hp, p.n_int2) == (1, 3)
    seen.clear()
    cuda_ops.DecodePlan(1, 32, 8, 128, None, "cuda")  # no INT2 splits planned: unchanged
    assert seen == [(1, None, None)]


def test_equal_memory_bound_arithmetic():
    step_ablate = bench_module("step_ablate")
    out = {"copy_bandwidth_Bps": 4e12, "kv_read_bytes": 40e9, "equal_memory": {"oscar_batch": 60, "bf16_batch": 8},
           "bf16": {"no_attention": {"replay_ms": 5.0}, "full": {"replay_ms": 16.0}}, "oscar": {"full": {"replay_ms": 20.0}}}
    b = step_ablate.equal_memory_bound(out, types.SimpleNamespace(target_ratio=6.0))
    assert b["bf16_tokens_per_s"] == pytest.approx(500.0)
    assert b["measured_ratio"] == pytest.approx(3000.0 / 500.0)
    assert b["best_oscar_tokens_per_s"] == pytest.approx(60 / 0.015)  # 5 ms shared + 40 GB at 4 TB/s
    # 6x of 500 tokens/s at batch 60 is a 20 ms step: 15 ms for the KV part, whose bytes take 10 ms at copy bandwidth
    assert b["kv_part_ms_for_target"] == pytest.approx(15.0)
    assert b["copy_share_needed_for_target"] == pytest.approx(10.0 / 15.0)


def test_step_ablate_runs_both_points(tmp_path):
    one = run_script("step_ablate", tmp_path, "--bf16-backends", "default,PAGED_TORCH")
    assert set(one["oscar"]) == {"full", "no_append", "no_decode", "no_kv"}
    assert set(one["bf16"]) == {"full", "no_attention"} and one["kv_read_bytes"] > 0
    assert set(one["bf16"]["full"]["full_backends"]) == {"default", "PAGED_TORCH"}  # both ran (no error string)
    assert not any(isinstance(v, str) for v in one["bf16"]["full"]["full_backends"].values())
    eq = run_script("step_ablate", tmp_path, "--equal-memory", "--kv-budget-gib", "0.001")
    b_o, b_b = eq["equal_memory"]["oscar_batch"], eq["equal_memory"]["bf16_batch"]
    assert eq["batch"] == b_o > b_b >= 1
    assert (eq["bf16"]["full"]["batch"], eq["bf16"]["full"]["context"]) == (b_b, eq["context"])
    assert eq["bf16"]["no_attention"]["batch"] == b_o  # BF16 without attention at OSCAR's batch


def test_bench_model_runs_batch1_and_equal_memory(tmp_path):
    out = run_script("bench_model", tmp_path, "--contexts", "64", "--tput-context", "256", "--kv-budget-gib", "0.001",
                     "--steps", "2")
    (m,) = out["models"]
    row = m["batch1"][0]
    assert row["context"] == 64 and "step_ms" in row["oscar"] and "step_ms" in row["bf16"]
    eq = m["equal_memory"]
    assert eq["oscar"]["batch"] > eq["bf16"]["batch"] >= 1 and eq["oscar"]["tokens_per_s"] > 0


def test_bench_model_runs_on_log8_records(tmp_path):
    """``--scale-dtype log8``: the batch-1 and equal-memory rows run on method oscar+log8 (named in the JSON), and
    its rows fit more sequences into the same KV budget than fp16 records would (fewer bytes per row)."""
    out = run_script("bench_model", tmp_path, "--contexts", "64", "--tput-context", "2048", "--kv-budget-gib", "0.004",
                     "--steps", "2", "--scale-dtype", "log8")
    assert out["oscar_method"] == "oscar+log8"
    (m,) = out["models"]
    assert "step_ms" in m["batch1"][0]["oscar"] and m["equal_memory"]["oscar"]["tokens_per_s"] > 0
    fp16 = run_script("bench_model", tmp_path, "--contexts", "", "--tput-context", "2048", "--kv-budget-gib", "0.004",
                      "--steps", "2", "--tput-methods", "bf16")
    assert fp16["oscar_method"] == "oscar"
    assert m["equal_memory"]["oscar_bytes_per_row"] < fp16["models"][0]["equal_memory"]["oscar_bytes_per_row"]


def test_bench_model_log8_rows_save_64_bytes_per_int2_tile(bm, monkeypatch):
    """``--scale-dtype log8`` (method oscar+log8, the random rotations carry scale tops): every allocated INT2 tile of
    16 tokens per layer and KV head is 64 bytes smaller (scale and zero in one byte each), nothing else changes."""
    cfg = bm.tiny_config()
    layers, hkv, d = bm.dims(cfg)
    rot = bm.random_rotations(cfg, d)
    for ctx in (2048, 4096):
        fp16_row, _ = bm.oscar_row_bytes(cfg, rot, ctx)
        monkeypatch.setattr(bm, "OSCAR", "oscar+log8")
        log8_row, _ = bm.oscar_row_bytes(cfg, rot, ctx)
        monkeypatch.setattr(bm, "OSCAR", "oscar")
        tiles, rest = divmod(fp16_row - log8_row, 64 * layers * hkv)
        assert rest == 0 and abs(tiles - (ctx + 64 - bm.SINK - bm.RECENT) / 16) <= 1, (ctx, fp16_row, log8_row)


def test_speedup_of_ideal_is_the_replay_ratio_over_the_ideal_ratio(bm):
    """Issue 8's batch-1 share (forty-first session's 8B 128K row): replay-time speedup / ideal-from-bytes speedup;
    None on CPU (no ideal) or with a side missing or failed."""
    row = {"oscar_compiled": {"replay_ms": 7.754, "ideal_ms": 5.887},
           "bf16_compiled": {"replay_ms": 12.614, "ideal_ms": 11.338}}
    sp = bm.speedup_of_ideal(row)
    assert sp["speedup"] == pytest.approx(1.627, abs=1e-3) and sp["ideal_speedup"] == pytest.approx(1.926, abs=1e-3)
    assert sp["share_of_ideal"] == pytest.approx(0.845, abs=1e-3)
    assert bm.speedup_of_ideal(row, "") is None
    assert bm.speedup_of_ideal({**row, "bf16_compiled": {"error": "x"}}) is None
    assert bm.speedup_of_ideal({**row, "oscar_compiled": {"replay_ms": 1.0, "ideal_ms": None}}) is None


def _logits(bm, session, *args, **kw):
    """Two steps' logits of a bench session, and its KV bytes (None for the StaticCache session)."""
    with torch.no_grad(), session(*args, **kw) as s:
        s["reset"]()
        first = s["fwd"]()
        s["reset"]()
        return first, s["fwd"](), s.get("kv_alloc_bytes")


@pytest.mark.parametrize("compile", [False, True])
def test_paged_bf16_session_equals_the_static_cache_step(bm, compile):
    """The FlashInfer baseline's glue (page pools filled with bf16_session's K/V, the step's K/V written at slot
    ``context``, the opaque op under torch.compile) with the torch stand-in for FlashInfer's decode: the same logits
    as the StaticCache step, step after step (the write position is reset)."""
    cfg = bm.tiny_config()
    model = bm.build_model(cfg, "cpu")
    ctx, batch = 40, 2  # 41 tokens: a partial last page
    a1, a2, _ = _logits(bm, bm.bf16_session, model, cfg, ctx, batch, "cpu", compile)
    b1, b2, alloc = _logits(bm, bm.paged_bf16_session, model, cfg, ctx, batch, "cpu", compile, "torch")
    torch.testing.assert_close(b1, a1, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b2, a2, rtol=1e-5, atol=1e-5)
    pages = -(-41 // bm.PAGED_BF16_PAGE)
    assert alloc == 2 * batch * pages * bm.PAGED_BF16_PAGE * bm.dims(cfg)[1] * bm.dims(cfg)[2] * 4 * cfg.num_hidden_layers


def test_paged_bf16_decode_torch_reads_only_the_first_tokens(bm):
    g = torch.Generator().manual_seed(0)
    B, pages, page, hkv, hq, d, n = 2, 3, 4, 2, 4, 8, 9
    pool = torch.randn(B * pages, 2, page, hkv, d, generator=g)
    q = torch.randn(B, hq, d, generator=g)
    out = bm.paged_bf16_decode_torch(q, pool, n, 0.5)
    junk = pool.clone().view(B, pages, 2, page, hkv, d)
    junk[:, 2, :, 1:] = 1e4  # tokens 9.. of every sequence
    torch.testing.assert_close(bm.paged_bf16_decode_torch(q, junk.view_as(pool), n, 0.5), out)
    k = pool.view(B, pages, 2, page, hkv, d)[:, :, 0].reshape(B, pages * page, hkv, d)[:, :n]
    v = pool.view(B, pages, 2, page, hkv, d)[:, :, 1].reshape(B, pages * page, hkv, d)[:, :n]
    b, h = 1, 3  # query head 3 reads KV head 1 (groups of 2)
    p = torch.softmax(0.5 * k[b, :, h // 2] @ q[b, h], 0)
    torch.testing.assert_close(out[b, h], p @ v[b, :, h // 2])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_flashinfer_baseline_equals_sdpa(bm):
    """On the GPU: the model step with FlashInfer's paged BF16 decode equals the SDPA StaticCache step (bf16), and
    the step captures in a CUDA graph (bench_bf16's FLASHINFER row has a time, not an error)."""
    pytest.importorskip("flashinfer")
    cfg = bm.tiny_config()
    cfg.head_dim = 128  # the bench models' head_dim: FlashInfer's JIT build of this test serves bench_model too
    model = bm.build_model(cfg, "cuda")
    ctx, batch = 1000, 3
    a, _, _ = _logits(bm, bm.bf16_session, model, cfg, ctx, batch, "cuda")
    b, _, _ = _logits(bm, bm.paged_bf16_session, model, cfg, ctx, batch, "cuda")
    rel = ((b.float() - a.float()).norm() / a.float().norm()).item()
    assert rel < 1e-2, rel
    r = bm.bench_bf16(model, cfg, ctx, batch, 3, "cuda", False, ["CUDNN_ATTENTION", "FLASHINFER"])
    assert "step_ms" in r["backends"]["FLASHINFER"], r["backends"]["FLASHINFER"]


def test_kernel_diff_lists_the_kernels_one_step_has_and_the_other_not(tmp_path):
    """bench/kernel_diff.py over profile_step's JSON: inductor's numeric suffixes merged, equal counts left out."""
    k = lambda n, c, us: {"name": n, "count_per_step": c, "us_per_step": us}  # noqa: E731
    prof = {"runs": [
        {"method": "oscar", "compiled": True, "graph": {"all": [k("triton_poi_fused_add_3", 36, 50.0), k("gemm", 145, 3000),
                                                                 k("append_kernel", 36, 30.0)]}},
        {"method": "bf16", "compiled": True, "graph": {"all": [k("triton_poi_fused_add_7", 36, 40.0), k("gemm", 145, 2900),
                                                                k("cudnn_attn", 36, 900.0)]}}]}
    p = tmp_path / "p.json"
    p.write_text(json.dumps(prof))
    r = subprocess.run([sys.executable, str(BENCH / "kernel_diff.py"), str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()[1:]
    assert [ln.split()[0] for ln in lines] == ["append_kernel", "cudnn_attn"]


def test_decode_chain_times_every_sequence(tmp_path):
    """bench/decode_chain.py (the decode call's cost between its neighbours in a layer) runs its sequences and
    derives the decode's share of each from the same run (also with its first pages made L2-hot, --warm-tiles, and
    with the GEMV's weights read beside it, --prefetch-mb)."""
    r = run_script("decode_chain", tmp_path, "--warm-tiles", "2", "--prefetch-mb", "0.01")["points"][0]
    for k in ("decode", "gemv", "append", "decode_gemv", "append_gemv", "append_decode_gemv", "tiny", "tiny_decode",
              "decode_tiny", "gemv_tiny", "append_decode"):
        assert r[f"{k}_us"] > 0
    assert r["decode_in_chain_us"] == pytest.approx(r["append_decode_gemv_us"] - r["append_gemv_us"])
    assert r["decode_after_gemv_us"] == pytest.approx(r["decode_gemv_us"] - r["gemv_us"])
    assert r["decode_after_tiny_us"] == pytest.approx(r["tiny_decode_us"] - r["tiny_us"])
    assert r["gemv_beside_tiny_us"] == pytest.approx(r["gemv_tiny_us"] - r["tiny_us"])
    assert r["decode_before_tiny_us"] == pytest.approx(r["decode_tiny_us"] - r["tiny_us"])
    assert r["decode_after_append_us"] == pytest.approx(r["append_decode_us"] - r["append_us"])
    assert r["decode_in_chain_warm_us"] == pytest.approx(r["warm_append_decode_gemv_us"] - r["warm_append_gemv_us"])
    assert r["chain_gain_prefetch_us"] == pytest.approx(r["append_decode_nopf_gemv_us"] - r["append_decode_pf_gemv_us"])


def test_split_spec_parses_and_refuses_bad_specs():
    """--alt-splits of bench_decode.py and decode_chain.py, --sweep-splits of bench_decode.py: one parser, a one-line
    argparse error on a bad entry."""
    bd = bench_module("bench_decode")
    assert bd.split_spec("131072x1=2+31,131072x1=1+31,") == [("131072x1", (2, 31)), ("131072x1", (1, 31))]
    assert bd.split_spec("") == []
    for bad in ("131072x1", "131072x1=2", "131072=2+31", "131072x1=a+31"):
        with pytest.raises(bd.argparse.ArgumentTypeError, match="is not LxB=hp\\+int2"):
            bd.split_spec(bad)
    r = subprocess.run([sys.executable, str(BENCH / "decode_chain.py"), "--smoke", "--alt-splits", "700x2=2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "'700x2=2' is not LxB=hp+int2" in r.stderr
    r = subprocess.run([sys.executable, str(BENCH / "bench_decode.py"), "--smoke", "--sweep-splits", "2+31"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "'2+31' is not LxB=hp+int2" in r.stderr


def test_flashinfer_configs_parse_and_refuse_bad_lists():
    """--flashinfer-configs of bench_decode.py: tensor-core / CUDA-core decode and the page size per entry; a bad
    entry or a repeated one is a one-line argparse error before any work."""
    bd = bench_module("bench_decode")
    assert bd.flashinfer_configs("tc16, cc64,") == ["tc16", "cc64"]
    assert [bd.flashinfer_config(c) for c in ("tc16", "cc64")] == [(True, 16), (False, 64)]
    for bad in ("tc", "xx16", "tc0", "tc16,tc16", ","):
        with pytest.raises(bd.argparse.ArgumentTypeError):
            bd.flashinfer_configs(bad)
    r = subprocess.run([sys.executable, str(BENCH / "bench_decode.py"), "--smoke", "--flashinfer-configs", "tc16,gpu"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "expected tc<page> or cc<page>" in r.stderr


def test_bench_decode_lists_are_checked_when_read():
    """bench_decode.py's list options (table contexts / batches, sweep / probe / read points, tagged points, scales,
    pads) are parsed by argparse types: values as the script uses them, a bad entry a one-line error before any
    work (`oscar-kv bench` passes its arguments through); ``--contexts ""`` stays "no table rows". bench_model.py
    checks its contexts, modes and model names the same way."""
    bd = bench_module("bench_decode")
    A = bd.argparse.ArgumentTypeError
    assert bd.spec_list(bd.count, "1")("4096, 32768,") == [4096, 32768]
    assert bd.spec_list(bd.count, "1", empty_ok=True)("") == []
    assert bd.spec_list(bd.point, "1x1")("131072x1,32768x32") == [(131072, 1), (32768, 32)]
    assert bd.spec_list(bd.tagged_point(bd.variant_spec), "1x1:7")("131072x1:7") == [(131072, 1, 7)]
    assert bd.spec_list(bd.hp_split, "auto")("auto,2") == [None, 2]
    assert bd.spec_list(bd.positive_float, "1")("0.5,2") == [0.5, 2.0]
    assert bd.spec_list(lambda x: bd.count(x, 0), "0")("0,1") == [0, 1]
    for parse, bad in ((bd.count, "0"), (bd.count, "abc"), (bd.point, "1x"), (bd.point, "0x1"),
                       (bd.tagged_point(bd.count), "1x1"), (bd.tagged_point(bd.count), "1x1:big"),
                       (bd.positive_float, "0"), (bd.hp_split, "x"), (bd.variant_spec, "v7")):
        with pytest.raises(A):
            bd.spec_list(parse, "e")(bad)
    with pytest.raises(A, match="empty list"):
        bd.spec_list(bd.count, "1")(",")
    for args, msg in ((["--contexts", "abc"], "argument --contexts: 'abc' is not an integer >= 1"),
                      (["--diag", "131072x1"], "argument --diag: '131072x1' is not LxB:X"),
                      (["--sweep-scales", "0,1"], "argument --sweep-scales: '0' is not a positive number"),
                      (["--probe-modes", "1,9"], "argument --probe-modes: probe mode '9' is unknown"),
                      (["--hp-tiles-per-warp", "0"], "argument --hp-tiles-per-warp: invalid count value: '0'"),
                      (["--variant", "v7"], "argument --variant: invalid variant_spec value: 'v7'"),
                      (["--also-log8"], "need the CUDA kernels"), (["--scale-dtype", "log8"], "drop --smoke")):
        r = subprocess.run([sys.executable, str(BENCH / "bench_decode.py"), "--smoke", *args],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "Traceback" not in r.stderr and msg in r.stderr, r.stderr[-300:]
    for args, msg in ((["--contexts", "8k"], "'8k' is not an integer >= 1"), (["--modes", "fast"], "--modes: ['fast']"),
                      (["--models", "qwen9"], "--models: no config for ['qwen9']")):
        r = subprocess.run([sys.executable, str(BENCH / "bench_model.py"), *args],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "Traceback" not in r.stderr and msg in r.stderr, r.stderr[-300:]


def test_trace_decode_summary_reads_the_kernel_records():
    """bench/trace_decode.py's summary of the trace build's records (synthetic here: two CTAs of two warps, the
    second the merging one, its SM at 2 cycles per ns): spreads from the first entry, the end after the last warp's
    loop, and the merging CTA's event deltas in cycles and ns."""
    td = bench_module("trace_decode")
    gt = torch.zeros(td.CTAS, td.EVENTS, dtype=torch.int64)
    gt[0, :5] = torch.tensor([1000, 1500, 5000, 5200, 5800])
    gt[1] = torch.tensor([1100, 1600, 6000, 6300, 7000, 7600, 7800, 8400])
    gt[0, 5:] = torch.tensor([300, 400, 500])  # CTA 0 merged in an earlier call: older than its entry, not a merge
    ck = gt * 2
    warp = torch.zeros(td.CTAS, td.WARPS, dtype=torch.int64)
    warp[0, :2] = torch.tensor([4000, 4900])
    warp[1, :2] = torch.tensor([5500, 5900])
    gt[2, :2] = torch.tensor([1200, 1300])  # an unused split: entry and return, no loop
    sm = torch.zeros(td.CTAS, dtype=torch.int32)
    sm[1] = 7
    s = td.summarize(gt, ck, warp, sm, nwarp=2)
    assert (s["ctas"], s["ctas_working"], s["sms"]) == (3, 2, 2)
    assert s["entry_us"]["first"] == 0.0 and s["entry_us"]["last"] == pytest.approx(0.2)
    assert s["stream_end_us"] == pytest.approx(4.9) and s["kernel_last_event_us"] == pytest.approx(7.4)
    assert s["end_after_stream_us"] == pytest.approx(2.5)
    (m,) = s["merges"]
    assert m["cta"] == 1 and m["sm"] == 7 and m["ghz"] == pytest.approx(2.0)
    assert m["ns"] == pytest.approx({"2->3": 300, "3->4": 700, "4->5": 600, "5->6": 200, "6->7": 600})
    assert s["merge_ns_median"] == pytest.approx(m["ns"])
    assert s["per_cta"] == [[0, 0, 0.0, 0.5, 3.9], [1, 7, 0.1, 0.6, 4.9], [2, 0, 0.2, 0.3, -1]]


def test_trace_decode_sm_balance():
    """trace_decode.sm_balance: two SMs, one INT2 CTA each (split-major, bh = 2, one BF16-tier split whose CTAs are
    left out), both starting at 1 us; one ends at 5, the other at 9 (rates 1/4 and 1/8 CTA per us): shared at those
    rates the 2 CTAs end at 1 + 2 / (3/8) = 6.33 us, 2.67 us before the last end."""
    td = bench_module("trace_decode")
    per_cta = [[0, 5, 0.0, 0.5, 2.0], [1, 6, 0.0, 0.5, 2.5],  # BF16-tier split (c // 2 == 0): not counted
               [2, 0, 0.0, 1.0, 5.0], [3, 1, 0.0, 1.0, 9.0], [4, 1, 0.0, -1, -1]]  # an unused split: no loop
    b = td.sm_balance(per_cta, n_hp=1, bh=2)
    assert b["sms"] == 2 and b["sm_end_last"] == 9.0 and b["sm_end_median"] == 9.0
    assert b["balanced_end"] == pytest.approx(1 + 2 / (1 / 4 + 1 / 8))
    assert b["gain_us"] == pytest.approx(9.0 - b["balanced_end"])


def test_trace_decode_refuses_without_a_gpu():
    """Without CUDA the script says so in one line (no traceback)."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    r = subprocess.run([sys.executable, str(BENCH / "trace_decode.py"), "--points", "1024x1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "needs a CUDA GPU" in r.stderr


def test_mma_sass_names_native_and_emulated_mmas():
    """bench/mma_sass.py (no GPU): u8 x s8 is one native IMMA on sm_90a; e4m3 mma.sync is emulated there
    (F2FP unpacks + HMMA), the reason the INT2 kernel keeps an fp16 V side on Hopper (docs/KERNELS.md)."""
    import shutil

    ms = bench_module("mma_sass")
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    try:
        ms.tool("cuobjdump")
    except SystemExit:
        pytest.skip("needs cuobjdump (PATH or triton's bundled copy)")
    ops = lambda lines: [x.split()[0] for x in lines]  # noqa: E731
    assert ops(ms.sass_of("s32.u8.s8.s32", "sm_90a")) == ["IMMA.16832.U8.S8"]
    fp8 = ops(ms.sass_of("f32.e4m3.e4m3.f32", "sm_90a"))
    assert "HMMA.16816.F32" in fp8 and any(o.startswith("F2FP") for o in fp8) and not any("QMMA" in o for o in fp8)
    with pytest.raises(SystemExit, match="unknown --types"):
        ms.sass_of("f32.bf16.e4m3.f32", "sm_90a")


def test_bench_decode_config_takes_the_plan_knobs():
    """ours_config: the command line's knobs (here --hp-tiles-per-warp, the plan's BF16-tier rule input, and --variant)
    reach CudaDecodeConfig, and a keyword or variant of the caller (the fixed-cost diagnosis' per-warp sweep, a sweep's
    variants) overrides them."""
    bd = bench_module("bench_decode")
    old = bd.HP_PER_WARP, bd.VARIANT
    try:
        assert bd.ours_config(4).hp_tiles_per_warp is None  # the plan's rule
        bd.HP_PER_WARP = 3
        c = bd.ours_config("7")
        assert (c.variant, c.hp_tiles_per_warp, c.early_reads) == (7, 3, bd.EARLY)
        assert bd.ours_config(None, hp_tiles_per_warp=1).hp_tiles_per_warp == 1
        assert bd.ours_config(None).variant is None  # the plan's rule
        bd.VARIANT = 6  # --variant: the table rows' variant where the caller names none; a sweep's own wins
        assert (bd.ours_config(None).variant, bd.ours_config(4).variant) == (6, 4)
    finally:
        bd.HP_PER_WARP, bd.VARIANT = old
