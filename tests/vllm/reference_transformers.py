"""The reference side of the vLLM cross-check, run in the MAIN venv (transformers 5.24, oscar-kv's pins):

    python tests/vllm/reference_transformers.py OUT.json [--tokens 24] [--prompt 420]

Loads the embedded SmolLM2-135M (float32 safetensors under ~/.cache/oscar-kv, converted once), makes
(or reuses) a small calibrated OSCAR rotation file, and greedily generates with oscar-kv's own
transformers path (OscarCache + the rotated "oscar_sdpa" attention), prompt prefilled in one call then
one token per step. Writes the model folder, rotation file, prompt ids, generated ids, their
log-probabilities and the window settings as JSON. The vLLM venv pins transformers < 5.20, so the two
sides run in their own environments and meet only through files: this is the sound way to compare.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=24)
    ap.add_argument("--prompt", type=int, default=420)
    ap.add_argument("--sink", type=int, default=64)
    ap.add_argument("--recent", type=int, default=256)
    ap.add_argument("--calib-tokens", type=int, default=1024)
    ap.add_argument("--scale-dtype", default="float16", choices=["float16", "log8"])
    a = ap.parse_args()

    from oscarkv.cache import OscarCache
    from oscarkv.calibrate.core import calibrate
    from oscarkv.data import load_text, token_ids
    from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention
    from oscarkv.methods import make_method
    from oscarkv.models import cache_dir, load_model, resolve_model_path
    from oscarkv.rotation import RotationSet

    t0 = time.time()
    torch.manual_seed(0)
    lm = load_model("default")
    model, tok = lm.model, lm.tokenizer
    path, _ = resolve_model_path("default")
    rot_path = cache_dir() / "vllm-test" / f"smollm2-rot-{a.calib_tokens}.safetensors"
    if not rot_path.exists() or RotationSet.load(rot_path).k_scale_top is None:  # (files before log8 lack tops)
        ids = token_ids(tok, load_text("pydoc-calib"), a.calib_tokens, "pydoc-calib")
        rs = calibrate(model, ids, seq_len=512, progress=False, model_id=lm.model_id)
        rs.save(rot_path)
    rs = RotationSet.load(rot_path, model.config)

    method = make_method("oscar", sink=a.sink, recent=a.recent, scale_dtype=a.scale_dtype)
    page = getattr(method, "page", 1)  # 1 = the per-token rule before the page parameter existed
    if dataclasses.is_dataclass(method) and "page" in {f.name for f in dataclasses.fields(method)}:
        method = dataclasses.replace(method, page=16)
        page = 16
    prompt = token_ids(tok, load_text("pydoc-eval"), a.prompt, "pydoc-eval")
    cache = OscarCache(model.config, method, rs)
    enable_oscar_attention(model, cache)
    out_ids, logprobs, margins = [], [], []
    with torch.no_grad():
        x = prompt[None]
        for _ in range(a.tokens):
            logits = model(input_ids=x, past_key_values=cache, use_cache=True).logits[0, -1].float()
            lp = torch.log_softmax(logits, -1)
            nxt = int(lp.argmax())
            out_ids.append(nxt)
            logprobs.append(float(lp[nxt]))
            top2 = lp.topk(2).values
            margins.append(float(top2[0] - top2[1]))  # how close greedy was to a tie
            x = torch.tensor([[nxt]])
    disable_oscar_attention(model, cache)
    res = {
        "model": str(path), "rotations": str(rot_path), "prompt_ids": prompt.tolist(), "tokens": out_ids,
        "logprobs": logprobs, "top2_margins": margins, "sink": a.sink, "recent": a.recent, "page": page, "group_size": method.group_size,
        "scale_dtype": a.scale_dtype,
        "seconds": time.time() - t0,
    }
    Path(a.out).write_text(json.dumps(res))
    print(json.dumps({k: v for k, v in res.items() if k != "prompt_ids"}))


if __name__ == "__main__":
    main()
