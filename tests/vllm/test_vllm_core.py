"""Engine-free tests of the vLLM backend's write + attention (core.py) against the dense reference,
on vLLM-shaped pages and metadata: chunked prefill, decode, prefix sharing, block reuse, preemption,
shadow eviction, per-head rotations, the kernels' decode tables."""

import pytest
import torch

from oscarkv.integrations.vllm.core import OscarSettings, ShadowManager, int2_len
from oscarkv.integrations.vllm.testing import MiniVLLM

S = OscarSettings(rotations="x", sink=16, recent=32, page=16)
# INT2 pages as per-token cells, or as tile16 records (the CUDA decode kernel's; here read and written by torch)
LAYOUTS = ["logical", "tile16"]


def check(res, atol=2e-5):
    for rid, (out, exp) in res.items():
        assert torch.allclose(out, exp, atol=atol, rtol=1e-4), (rid, (out - exp).abs().max().item())


def toks(seed, n):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 1000, (n,), generator=g).tolist()


def test_window_rule():
    assert [int2_len(t, 64, 256, 16) for t in (0, 320, 335, 336, 1000)] == [0, 0, 0, 16, 672]
    assert int2_len(400, 64, 256, 1) == 80


@pytest.mark.parametrize("scale_dtype", ["float16", "log8"])
@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_prefill_chunks_and_decode(per_head, layout, scale_dtype):
    m = MiniVLLM(S, per_head=per_head, layout=layout, scale_dtype=scale_dtype)
    m.add("a", toks(1, 200))
    m.add("b", toks(2, 200))
    check(m.step([("a", 40), ("b", 7)]))
    check(m.step([("a", 30), ("b", 60)]))  # a crosses S + W: INT2 history appears
    for _ in range(20):
        check(m.step([("a", 1), ("b", 1)]))
    check(m.step([("a", 1), ("b", 45)]))


def test_head_dim_not_a_power_of_two():
    """head_dim 96 (the torch path; the GPU kernels take powers of two)."""
    m = MiniVLLM(S, d=96)
    m.add("a", toks(18, 120))
    check(m.step([("a", 70)]))
    for _ in range(3):
        check(m.step([("a", 1)]))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_block_reuse_never_reads_stale_rows(layout):
    m = MiniVLLM(S, num_blocks=12, layout=layout)
    m.add("a", toks(3, 150))
    check(m.step([("a", 100)]))
    for _ in range(5):
        check(m.step([("a", 1)]))
    m.remove("a")  # its blocks (and still-mapped shadows) go back to the pool
    m.add("b", toks(4, 150))  # different tokens, same blocks in another order
    check(m.step([("b", 50)]))
    for _ in range(12):
        check(m.step([("b", 1)]))
    check(m.step([("b", 40)]))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_preemption_recompute(layout):
    m = MiniVLLM(S, num_blocks=14, layout=layout)
    m.add("a", toks(5, 160))
    m.add("b", toks(6, 160))
    check(m.step([("a", 70), ("b", 70)]))
    check(m.step([("a", 1), ("b", 1)]))
    m.preempt("b")  # blocks freed; a runs and takes some of them
    check(m.step([("a", 40)]))
    check(m.step([("a", 1)]))
    check(m.step([("b", 72)]))  # recomputed from scratch into whatever blocks are free
    for _ in range(3):
        check(m.step([("a", 1), ("b", 1)]))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_prefix_sharing(layout):
    """b hits a's first 4 blocks while a runs. Block 0 (sink) is shadowed by a: exact. a had already
    demoted positions 48..63 (block 3) to INT2 when b arrives, so b's window reads them from INT2
    (the one documented difference from a fresh computation; never another request's or stale rows)."""
    m = MiniVLLM(S, layout=layout)
    base = toks(7, 120)
    m.add("a", base)
    check(m.step([("a", 100)]))
    m.add("b", base[:64] + toks(8, 56), share_from="a", share_blocks=4, int2_rows=range(48, 64))
    check(m.step([("b", 20), ("a", 1)]))
    for _ in range(10):
        check(m.step([("a", 1), ("b", 1)]))


def test_prefix_sharing_chunked_sink_exact():
    """A hit on blocks that were in the owner's window when written (its sink) is exact."""
    m = MiniVLLM(S)
    base = toks(15, 120)
    m.add("a", base)
    check(m.step([("a", 20)]))
    check(m.step([("a", 20)]))
    m.add("b", base[:32] + toks(16, 56), share_from="a", share_blocks=2)
    check(m.step([("b", 30), ("a", 1)]))
    check(m.step([("b", 1), ("a", 1)]))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_evicted_shadow_reads_int2_not_stale(layout):
    """With a pool too small to keep a finished request's sink, a later prefix hit on that sink reads it
    from INT2 (refilled at mapping), never the rows of the page's new owner."""
    m = MiniVLLM(S, num_blocks=40, shadow_cap=1 + 3, layout=layout)
    base = toks(9, 100)
    m.add("a", base)
    check(m.step([("a", 64)]))  # window blocks 1, 3, 4 -> pages 1..3
    sink_block = m.reqs["a"]["blocks"][0]
    m.remove("a")
    m.add("c", toks(10, 100))
    check(m.step([("c", 64)]))  # c's window takes all three pages over
    m.remove("c")
    m.add("b", base[:16] + toks(11, 40), cached_blocks=[sink_block], int2_rows=range(16))
    check(m.step([("b", 20)]))
    check(m.step([("b", 1)]))


def test_tile16_pages_hold_the_cells_as_records():
    """The same steps with either page layout: the bytes differ (records, not cells) and read back as the
    same logical rows, block by block."""
    from oscarkv.kernels.layout import blocks_to_logical

    ms = {lay: MiniVLLM(S, layout=lay) for lay in LAYOUTS}
    for m in ms.values():
        m.add("a", toks(21, 150))
        m.step([("a", 100)])
        for _ in range(5):
            m.step([("a", 1)])
    assert [m.layer.layout for m in ms.values()] == LAYOUTS
    assert not torch.equal(ms["logical"].kv, ms["tile16"].kv)
    pools = [m.layer.pool(m.kv) for m in ms.values()]
    blocks = torch.arange(ms["logical"].kv.shape[0])
    for which in "kv":
        for x, y in zip(*(blocks_to_logical(p, blocks, which) for p in pools)):
            assert torch.equal(x, y)


def test_tile16_layout_refused_where_it_does_not_fit():
    from oscarkv.errors import InputError

    m = MiniVLLM(S, d=96, layout="tile16")
    m.add("a", toks(22, 40))
    with pytest.raises(InputError, match="OSCAR_KV_LAYOUT=tile16 needs"):
        m.step([("a", 20)])
    auto = MiniVLLM(S, layout="auto")  # auto on CPU: cells
    auto.add("a", toks(22, 40))
    auto.step([("a", 20)])
    assert auto.layer.layout == "logical"


def test_shadow_manager_full_pool_error():
    mg = ShadowManager(3)
    mg.assign([5, 6])
    with pytest.raises(RuntimeError, match="OSCAR_KV_SHADOW_PAGES"):
        mg.assign([5, 6, 7])


@pytest.mark.parametrize("scale_dtype", ["float16", "log8"])
@pytest.mark.parametrize("backend", ["torch"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_decode_tables_for_kernels(backend, layout, scale_dtype):
    """q_len == 1 rows through the package's decode API (two-tier tables over vLLM pages + shadow)."""
    m = MiniVLLM(S, kernels=backend, layout=layout, scale_dtype=scale_dtype)
    m.add("a", toks(12, 200))
    m.add("b", toks(13, 200))
    check(m.step([("a", 90), ("b", 30)]))
    for _ in range(20):
        check(m.step([("a", 1), ("b", 1)]))


def test_exact_mode():
    m = MiniVLLM(OscarSettings(rotations="x", mode="exact", sink=16, recent=32))
    m.add("a", toks(14, 100))
    check(m.step([("a", 60)]))
    for _ in range(5):
        check(m.step([("a", 1)]))


@pytest.mark.parametrize("mode", ["exact", "oscar"])
def test_centering_applied(mode):
    """Calibrated means (rotation/centering.py): rows stored as (x - mu) @ R and mu_V @ R_V added to the
    output; the reference writes that out (in exact mode it equals the uncentered attention)."""
    m = MiniVLLM(OscarSettings(rotations="x", mode=mode, sink=16, recent=32), means=True)
    m.add("a", toks(17, 150))
    check(m.step([("a", 90)]), atol=1e-4)
    for _ in range(5):
        check(m.step([("a", 1)]), atol=1e-4)


def test_lloyd_max_levels_applied():
    """Non-uniform INT2 levels (a file from calibrate --levels lloyd-max) through the pages and the shadow
    pool equal the reference written out with the same levels."""
    m = MiniVLLM(OscarSettings(rotations="x", sink=16, recent=32), levels=(0.0, 0.875, 2.125, 3.0))
    assert m.layer.kernels == "off"  # the kernels take uniform levels: the torch path
    m.add("a", toks(19, 170))
    check(m.step([("a", 90)]), atol=1e-4)
    for _ in range(5):
        check(m.step([("a", 1)]), atol=1e-4)


def test_layer_plan_from_centered_file(tmp_path):
    """A format-2 file with k_mean / v_mean reaches the layer as its means (center="auto")."""
    from oscarkv.integrations.vllm.core import layer_compute_for
    from oscarkv.rotation import RotationSet

    eye = torch.eye(64)[None, None].repeat(2, 1, 1, 1)
    mk = torch.randn(2, 2, 64)
    p = RotationSet(eye, eye.clone(), k_mean=mk, v_mean=mk.clone(), meta={"centered": True}).save(tmp_path / "r.safetensors")
    lc = layer_compute_for(1, S, RotationSet.load(p), 64, torch.float32, 0.125)
    assert torch.equal(lc.k_mean0, mk[1])
    # the same means in a file not fitted for centered rows (plain calibrate): served uncentered, as oscar is
    p = RotationSet(eye, eye.clone(), k_mean=mk, v_mean=mk.clone()).save(tmp_path / "u.safetensors")
    assert layer_compute_for(1, S, RotationSet.load(p), 64, torch.float32, 0.125).k_mean0 is None


def test_layer_plan_takes_the_files_levels(tmp_path):
    """A file with Lloyd-Max levels (calibrate --levels lloyd-max) is served with them, on the torch path
    (the kernels take uniform levels); a file without them with uniform levels."""
    from oscarkv.integrations.vllm.core import layer_compute_for
    from oscarkv.rotation import RotationSet

    eye = torch.eye(64)[None, None].repeat(2, 1, 1, 1)
    lv = torch.tensor([0.0, 0.875, 2.125, 3.0]).repeat(2, 1)  # in the code range [0, 3], sorted; exact in fp32
    p = RotationSet(eye, eye.clone(), k_levels=lv, v_levels=lv.clone()).save(tmp_path / "l.safetensors")
    lc = layer_compute_for(1, S, RotationSet.load(p), 64, torch.float32, 0.125)
    assert lc.k_cfg.levels == lc.v_cfg.levels == (0.0, 0.875, 2.125, 3.0) and lc.kernels == "off"
    p = RotationSet(eye, eye.clone()).save(tmp_path / "u.safetensors")
    lc = layer_compute_for(1, S, RotationSet.load(p), 64, torch.float32, 0.125)
    assert lc.k_cfg.levels is None and lc.v_cfg.levels is None


def test_settings_errors_are_one_line(monkeypatch):
    from oscarkv.errors import InputError

    monkeypatch.setenv("OSCAR_KV_MODE", "fast")
    with pytest.raises(InputError, match="OSCAR_KV_MODE"):
        OscarSettings.from_env()
    monkeypatch.delenv("OSCAR_KV_MODE")
    monkeypatch.setenv("OSCAR_KV_LAYOUT", "tiles")
    with pytest.raises(InputError, match="OSCAR_KV_LAYOUT"):
        OscarSettings.from_env()
    monkeypatch.delenv("OSCAR_KV_LAYOUT")
    monkeypatch.setenv("OSCAR_KV_SCALE_DTYPE", "int8")
    with pytest.raises(InputError, match="OSCAR_KV_SCALE_DTYPE='int8' is not a scale format"):
        OscarSettings.from_env()
    monkeypatch.setenv("OSCAR_KV_SCALE_DTYPE", "log8")
    assert OscarSettings.from_env().scale_dtype == "log8"
    monkeypatch.delenv("OSCAR_KV_SCALE_DTYPE")
    monkeypatch.setenv("OSCAR_KV_MODE", "oscar")
    monkeypatch.setenv("OSCAR_KV_SINK", "-3")
    with pytest.raises(InputError, match="OSCAR_KV_SINK"):
        OscarSettings.from_env()
    monkeypatch.delenv("OSCAR_KV_SINK")
    monkeypatch.setenv("OSCAR_KV_SHADOW_PAGES", "40")
    monkeypatch.setenv("OSCAR_KV_ROTATIONS", "r.safetensors")
    s = OscarSettings.from_env()
    assert s.enabled and s.shadow_pages == 40 and s.sink == 64 and s.recent == 256 and s.page == 16
    assert s.layout == "auto"  # tile16 pages on a GPU where they fit (test_tile16_layout_refused...: cells on CPU)


def test_plugin_refuses_missing_file(monkeypatch):
    import oscarkv.integrations.vllm as plug
    from oscarkv.errors import InputError

    monkeypatch.setenv("OSCAR_KV_ROTATIONS", "/nonexistent/rot.safetensors")
    with pytest.raises(InputError, match="oscar-kv calibrate"):
        plug.register()
    monkeypatch.delenv("OSCAR_KV_ROTATIONS")
    plug.register()  # switched off: does nothing
    assert not plug._registered


def test_log8_pages(tmp_path, monkeypatch):
    """OSCAR_KV_SCALE_DTYPE=log8: one-byte scale / zero cells (8 d + 64 bytes per record of 16 tokens), the
    layer's configs carry the file's tops, and a file without tops is refused in one line at registration."""
    import oscarkv.integrations.vllm as plug
    from oscarkv.errors import InputError
    from oscarkv.integrations.vllm.core import PageFormat, layer_compute_for
    from oscarkv.rotation import RotationSet

    assert PageFormat(128, "oscar", torch.bfloat16, 1, torch.uint8).cell_bytes * 16 == 8 * 128 + 64
    eye = torch.eye(64)[None].repeat(2, 1, 1)
    tops = {"k_scale_top": torch.tensor([3.0, 2.0]), "v_scale_top": torch.tensor([1.0, 0.0])}
    rs = RotationSet(eye, eye.clone(), **tops)
    lc = layer_compute_for(1, OscarSettings(rotations="x", scale_dtype="log8"), rs, 64, torch.float32, 0.125)
    assert (lc.k_cfg.scale_top, lc.v_cfg.scale_top, lc.fmt.scale_dtype) == (2, 0, torch.uint8)
    bare = RotationSet(eye, eye.clone()).save(tmp_path / "bare.safetensors")
    monkeypatch.setenv("OSCAR_KV_ROTATIONS", str(bare))
    monkeypatch.setenv("OSCAR_KV_SCALE_DTYPE", "log8")
    with pytest.raises(InputError, match="OSCAR_KV_SCALE_DTYPE=log8 needs a rotation file with log8 scale tops"):
        plug.register()
    assert not plug._registered
