"""Passkey retrieval (needle in a haystack) through the real quantized cache.

A random 5-6 digit key is hidden at a given depth of real prose (the pydoc-eval text), followed by a
question; the model must generate the digits. Every method generates through ``OscarCache``:

* the prompt up to the question is prefilled in chunks of ``chunk`` tokens, so later chunks (and
  the question) read the earlier ones from the *quantized* cache. A one-shot prefill would let the
  whole prompt attend to itself unquantized (transformers' convention for one cache update), and
  quantization could not hurt retrieval at all;
* ``model.generate`` then feeds the question and decodes greedily.

Score: exact match of the first run of digits in the generated text.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm
from ..errors import InputError, StateError

INTRO = ("There is an important piece of information hidden inside a lot of irrelevant text. "
         "Find it and memorize it. I will ask you about it.\n\n")
NEEDLE = "\n\nThe pass key is {key}. Remember it. {key} is the pass key.\n\n"
QUESTION = "\n\nWhat is the pass key?"
ANSWER_START = "The pass key is"  # the answer is started for the model; it only has to add the digits
# "plain": the bare text; "chat": the same text as a user turn of the model's chat template with the
# assistant's reply started by "The pass key is" (see docs/ACCURACY.md for which one BF16 solves).
FORMATS = ("plain", "chat")
DEFAULT_FORMAT = "plain"


@dataclass
class PasskeyPrompt:
    ids: torch.Tensor  # [T] the whole prompt
    key: str
    needle_start: int  # token index where the needle begins
    needle_end: int
    prefill: int  # tokens fed through the cache in chunks; the rest (the question) goes to generate
    depth: float


def _encode(tok, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False))


def _frame(tok, fmt: str) -> tuple[list[int], list[int]]:
    """(tokens before the intro, tokens after the question) for a prompt format."""
    if fmt == "plain":
        return [], []  # the question itself ends with ANSWER_START
    if fmt == "chat":
        mark = "\x00HAYSTACK\x00"
        text = tok.apply_chat_template([{"role": "user", "content": mark}], tokenize=False, add_generation_prompt=True)
        pre, post = text.split(mark)
        return _encode(tok, pre), _encode(tok, post + ANSWER_START)
    raise InputError(f"unknown passkey format {fmt!r}; choose one of {FORMATS}")


def make_key(rng: random.Random) -> str:
    return str(rng.randint(10_000, 999_999))  # 5 or 6 digits


def build_prompt(tok, haystack: list[int] | torch.Tensor, length: int, depth: float, key: str,
                 offset: int = 0, fmt: str = DEFAULT_FORMAT) -> PasskeyPrompt:
    """A prompt of exactly ``length`` tokens: [frame] intro, filler with the needle inserted at
    ``depth`` (fraction of the filler), question [frame]. Filler = haystack[offset : ...]."""
    if not 0.0 <= depth <= 1.0:
        raise InputError(f"depth must be in [0, 1], got {depth}")
    pre, post = _frame(tok, fmt)
    head = pre + _encode(tok, INTRO)
    needle = _encode(tok, NEEDLE.format(key=key))
    question = _encode(tok, QUESTION) + post if fmt == "chat" else _encode(tok, QUESTION + " " + ANSWER_START)
    n_fill = length - len(head) - len(needle) - len(question)
    if n_fill < 1:
        raise InputError(f"passkey length {length} is too short for the prompt frame ({length - n_fill} tokens)")
    hay = list(torch.as_tensor(haystack).tolist())
    if offset + n_fill > len(hay):
        raise InputError(f"haystack has {len(hay)} tokens, {offset + n_fill} needed for length {length}")
    fill = hay[offset : offset + n_fill]
    cut = round(depth * n_fill)
    ids = head + fill[:cut] + needle + fill[cut:] + question
    start = len(head) + cut
    return PasskeyPrompt(torch.tensor(ids, dtype=torch.long), key, start, start + len(needle),
                         len(ids) - len(question), depth)


def parse_answer(text: str) -> str | None:
    """The first run of digits in the generated text ("12345." -> "12345"), or None."""
    m = re.search(r"\d+", text)
    return m.group(0) if m else None


def is_correct(text: str, key: str) -> bool:
    return parse_answer(text) == key


@torch.no_grad()
def generate_answer(model, tok, prompt: PasskeyPrompt, method, rotations=None, chunk: int = 512,
                    max_new_tokens: int = 8) -> str:
    """Chunked prefill through a fresh OscarCache, then greedy generation; returns the new text."""
    from ..cache import OscarCache

    from .harness import rotations_for

    cache = OscarCache(model.config, method, rotations_for(rotations, method))
    ids = prompt.ids[None]
    for a in range(0, prompt.prefill, chunk):
        b = min(a + chunk, prompt.prefill)
        model(ids[:, a:b], past_key_values=cache, use_cache=True, logits_to_keep=1)
    # generate sees a cache that already holds the prefill and feeds only the question tokens
    out = model.generate(ids, attention_mask=torch.ones_like(ids), cache=cache,
                         max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=_pad_id(tok, model))
    if cache.get_seq_length() < ids.shape[1]:  # generate made its own cache: the method was not applied
        raise StateError("model.generate did not use the OscarCache; this transformers version is unsupported")
    return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


def _pad_id(tok, model):
    pid = getattr(tok, "pad_token_id", None)
    if pid is None:
        pid = getattr(tok, "eos_token_id", None)
    return 0 if pid is None else pid


def make_prompts(tok, haystack=None, lengths=(1024, 2048), depths=(0.1, 0.5, 0.9), trials: int = 2,
                 fmt: str = DEFAULT_FORMAT, seed: int = 0) -> list[tuple[int, PasskeyPrompt]]:
    """The (length, prompt) pairs of a run: tokenizer work only, so the CLI builds them (and refuses a
    length too short for the frame or a haystack too short) before the model loads."""
    if haystack is None:
        from ..data import builtin_text

        haystack = builtin_text("pydoc-eval")
    hay = _encode(tok, haystack) if isinstance(haystack, str) else list(torch.as_tensor(haystack).tolist())
    rng = random.Random(seed)
    prompts = []  # (length, prompt)
    for length in lengths:
        for t in range(trials):
            for depth in depths:
                key = make_key(rng)
                off = rng.randint(0, max(0, len(hay) - length))  # a different stretch of text each time
                prompts.append((length, build_prompt(tok, hay, length, depth, key, off, fmt)))
    return prompts


def run_passkey(lm, methods, rotations=None, lengths=(1024, 2048), depths=(0.1, 0.5, 0.9), trials: int = 2,
                chunk: int = 512, fmt: str = DEFAULT_FORMAT, seed: int = 0, haystack=None,
                max_new_tokens: int = 8, progress: bool = True, prompts=None) -> dict:
    """Accuracy per (method, length) over depths x trials prompts (the same prompts for every method).

    ``lm``: anything with ``.model`` and ``.tokenizer`` (``models.LoadedModel``). ``haystack``: token
    ids or text; default the pydoc-eval text. ``prompts``: the ``make_prompts`` result for these
    arguments when the caller already built it (the CLI does, before the model loads).
    """
    model, tok = lm.model, lm.tokenizer
    if prompts is None:
        prompts = make_prompts(tok, haystack, lengths, depths, trials, fmt, seed)
    rows, details = [], []
    bar = tqdm(total=len(prompts) * len(methods), desc="passkey", unit="prompt", disable=not progress)
    for m in methods:
        hits: dict[int, list[bool]] = {n: [] for n in lengths}
        for length, p in prompts:
            bar.set_postfix_str(f"{m.name} len {length} depth {p.depth:.0%}")
            text = generate_answer(model, tok, p, m, rotations, chunk, max_new_tokens)
            ok = is_correct(text, p.key)
            hits[length].append(ok)
            details.append({"method": m.name, "length": length, "depth": p.depth, "key": p.key,
                            "answer": text, "correct": ok})
            bar.update(1)
        for length in lengths:
            h = hits[length]
            rows.append({"method": m.name, "length": length, "accuracy": sum(h) / len(h), "n": len(h)})
    bar.close()
    m0 = methods[0] if methods else None
    return {"task": "passkey", "lengths": list(lengths), "depths": list(depths), "trials": trials, "chunk": chunk,
            "format": fmt, "seed": seed, "sink": getattr(m0, "sink", None), "recent": getattr(m0, "recent", None),
            "results": rows, "details": details}


def format_passkey(res: dict) -> str:
    """Markdown table: one row per method, one column per length, cells = accuracy (hits/n)."""
    lengths = res["lengths"]
    names = list(dict.fromkeys(r["method"] for r in res["results"]))
    cell = {(r["method"], r["length"]): r for r in res["results"]}
    lines = ["| method | " + " | ".join(f"{n} tok" for n in lengths) + " |",
             "|---|" + "---:|" * len(lengths)]
    for name in names:
        cs = []
        for n in lengths:
            r = cell.get((name, n))
            cs.append("n/a" if r is None else f"{100 * r['accuracy']:.0f}% ({round(r['accuracy'] * r['n'])}/{r['n']})")
        lines.append(f"| {name} | " + " | ".join(cs) + " |")
    return "\n".join(lines)
