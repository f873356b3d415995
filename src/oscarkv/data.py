"""Real text that ships with every CPython, for calibration and evaluation without a network.

Source: ``pydoc_data.topics`` (the Python Language Reference, PSF license), 79 topics, ~113K
SmolLM2 tokens. Calibration and evaluation use disjoint topics (even / odd positions in sorted key
order), so no evaluated token was seen during calibration.

A second kind of text for calibration-domain ablations: the module docstrings of the standard
library (``stdlib-docstrings``), different in style from the reference manual.
"""

from __future__ import annotations

from pathlib import Path
from .errors import InputError, NotFoundError

SOURCES = ("pydoc-calib", "pydoc-eval", "stdlib-docstrings")


def _pydoc_topics() -> list[str]:
    from pydoc_data.topics import topics

    return [topics[k] for k in sorted(topics)]


def builtin_text(name: str) -> str:
    """Text of a built-in source (see ``SOURCES``)."""
    if name == "pydoc-calib":
        return "\n\n".join(_pydoc_topics()[0::2])
    if name == "pydoc-eval":
        return "\n\n".join(_pydoc_topics()[1::2])
    if name == "stdlib-docstrings":
        import importlib
        import pkgutil

        chunks = []
        skip = {"antigravity", "this", "idlelib", "tkinter", "turtledemo", "test", "lib2to3", "ensurepip"}
        for mod in sorted(m.name for m in pkgutil.iter_modules() if m.name in _stdlib_names()):
            if mod.startswith("_") or mod in skip:
                continue
            try:
                doc = importlib.import_module(mod).__doc__
            except Exception:  # some stdlib modules refuse to import on this platform
                continue
            if doc and len(doc) > 200:
                chunks.append(doc.strip())
        return "\n\n".join(chunks)
    raise InputError(f"unknown built-in text {name!r}; choose one of {SOURCES} or pass a file path")


def _stdlib_names() -> set[str]:
    import sys

    return set(getattr(sys, "stdlib_module_names", ()))


def load_text(source: str) -> str:
    """A built-in source name or a UTF-8 text file path."""
    if source in SOURCES:
        return builtin_text(source)
    if not str(source).strip():
        raise InputError(f"empty text source; pass a UTF-8 text file or one of {SOURCES}")
    p = Path(source)
    if not p.exists():
        raise NotFoundError(f"text {source!r} is neither a file nor one of the built-in sources {SOURCES}")
    if p.is_dir():
        raise InputError(f"text {source!r} is a directory; pass a UTF-8 text file or one of {SOURCES}")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{p} is not UTF-8 text; pass a plain text file") from None
    except OSError as e:
        raise InputError(f"cannot read {p}: {e.strerror or e}") from None
    if not text.strip():
        raise InputError(f"{p} is empty")
    return text


def token_ids(tokenizer, text: str, n_tokens: int | None = None, what: str = "text"):
    """Tokenize ``text`` (no special tokens) and return a 1-D LongTensor, at most ``n_tokens`` long."""
    import torch

    if n_tokens is not None and n_tokens < 1:
        raise InputError(f"{what}: asked for {n_tokens} tokens; ask for at least 1")
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids[0]
    if n_tokens is not None:
        if ids.numel() < n_tokens:
            raise InputError(
                f"{what} has {ids.numel()} tokens, fewer than the {n_tokens} asked for; "
                "pass a longer text or ask for fewer tokens"
            )
        ids = ids[:n_tokens]
    return ids.to(torch.long)
