"""Passkey task: prompt construction, answer parsing, end-to-end through OscarCache on a tiny model."""

import random
from types import SimpleNamespace

import pytest
import torch

from oscarkv.eval.passkey import (
    build_prompt,
    format_passkey,
    generate_answer,
    is_correct,
    make_key,
    parse_answer,
    run_passkey,
)
from oscarkv.methods import make_method

ALPHABET = " \nabcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,?!:'-"


class CharTokenizer:
    """One token per character (ids < 100), enough for the prompt code's encode/decode."""

    pad_token_id = eos_token_id = 0

    def encode(self, text, add_special_tokens=False):
        return [ALPHABET.index(c) if c in ALPHABET else 0 for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(ALPHABET[i] if i < len(ALPHABET) else "~" for i in map(int, ids))


@pytest.fixture(scope="module")
def lm(tiny):
    model = tiny(head_dim=16, hidden_size=64, max_position_embeddings=4096)
    return SimpleNamespace(model=model, tokenizer=CharTokenizer())


HAY = "the quick brown fox jumps over the lazy dog. " * 40


@pytest.mark.parametrize("length", [300, 512])
@pytest.mark.parametrize("depth", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_prompt_length_and_needle_depth(length, depth):
    tok = CharTokenizer()
    p = build_prompt(tok, tok.encode(HAY), length, depth, "123456", offset=7)
    assert p.ids.numel() == length
    text = tok.decode(p.ids)
    assert text.count("123456") == 2  # "The pass key is K. Remember it. K is the pass key."
    needle = tok.decode(p.ids[p.needle_start : p.needle_end])
    assert "The pass key is 123456." in needle
    # the needle sits at `depth` of the filler between the intro and the question
    intro_end = text.index("\n\n") + 2
    question_start = p.prefill
    n_fill = question_start - intro_end - (p.needle_end - p.needle_start)
    assert abs((p.needle_start - intro_end) - depth * n_fill) <= 1
    assert text.endswith("What is the pass key? The pass key is")
    assert "What is the pass key?" not in tok.decode(p.ids[: p.prefill])  # the question goes to generate
    # without the needle, the filler is the haystack from the requested offset on
    without = torch.cat([p.ids[: p.needle_start], p.ids[p.needle_end : p.prefill]])
    assert tok.decode(without)[intro_end:] == HAY[7 : 7 + n_fill]


def test_prompt_errors():
    tok = CharTokenizer()
    with pytest.raises(ValueError, match="too short"):
        build_prompt(tok, tok.encode(HAY), 50, 0.5, "12345")
    with pytest.raises(ValueError, match="haystack has"):
        build_prompt(tok, tok.encode(HAY), 5000, 0.5, "12345")
    with pytest.raises(ValueError, match="depth"):
        build_prompt(tok, tok.encode(HAY), 300, 1.5, "12345")


def test_keys_are_5_or_6_digits():
    rng = random.Random(0)
    assert all(len(make_key(rng)) in (5, 6) for _ in range(200))


@pytest.mark.parametrize("text,answer", [(" 12345.", "12345"), ("12345", "12345"), (" 123 456", "123"),
                                        (" unknown", None), ("", None), (" is 98765 and", "98765")])
def test_parse_answer(text, answer):
    assert parse_answer(text) == answer


def test_exact_match_only():
    assert is_correct(" 12345. Remember", "12345")
    assert not is_correct(" 123456", "12345")  # an extra digit is wrong
    assert not is_correct(" 1234", "12345")


def test_generation_goes_through_the_cache(lm):
    """The chunked prefill + generate equals plain greedy generation for bf16 (no quantization)."""
    tok = lm.tokenizer
    p = build_prompt(tok, tok.encode(HAY), 320, 0.5, "54321")
    ours = generate_answer(lm.model, tok, p, make_method("bf16"), chunk=64, max_new_tokens=6)
    ref = lm.model.generate(p.ids[None], attention_mask=torch.ones(1, 320, dtype=torch.long),
                              max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert ours == tok.decode(ref[0, 320:])
    # a quantized cache changes what the tiny model reads (and usually what it writes): it must at
    # least run and return the requested number of characters
    q = generate_answer(lm.model, tok, p, make_method("naive", sink=0, recent=0, group_size=16), chunk=64,
                        max_new_tokens=6)
    assert len(q) == 6


def test_run_passkey_end_to_end(lm):
    methods = [make_method(n, sink=4, recent=16, group_size=16) for n in ("bf16", "naive", "hadamard", "kivi")]
    res = run_passkey(lm, methods, None, lengths=[320, 400], depths=(0.1, 0.9), trials=1, chunk=64,
                      haystack=HAY, progress=False, max_new_tokens=4)
    assert res["task"] == "passkey" and res["lengths"] == [320, 400]
    assert {(r["method"], r["length"]) for r in res["results"]} == {(m.name, n) for m in methods for n in (320, 400)}
    assert all(r["n"] == 2 and 0.0 <= r["accuracy"] <= 1.0 for r in res["results"])
    # every method saw the same prompts
    keys = {m.name: [d["key"] for d in res["details"] if d["method"] == m.name] for m in methods}
    assert len({tuple(v) for v in keys.values()}) == 1
    table = format_passkey(res)
    assert table.splitlines()[0] == "| method | 320 tok | 400 tok |"
    assert len(table.splitlines()) == 2 + len(methods)


def test_format_passkey_cells():
    res = {"lengths": [1024], "results": [{"method": "bf16", "length": 1024, "accuracy": 2 / 3, "n": 3}]}
    assert "| bf16 | 67% (2/3) |" in format_passkey(res)


@pytest.mark.slow
def test_real_model_bf16_finds_the_key():
    """The ceiling: BF16 SmolLM2-135M retrieves the key from real prose with the plain format."""
    from oscarkv.models import load_model

    res = run_passkey(load_model("default"), [make_method("bf16")], lengths=[512], depths=(0.5,), trials=1,
                      progress=False)
    assert res["results"][0]["accuracy"] == 1.0, res["details"]
