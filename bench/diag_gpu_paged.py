"""Diagnose test_graph_paged_equals_reference_128_tokens on a GPU: per-step relative logit difference of
the paged path against the reference OscarCache path, for each kernel backend (CUDA on the tile16 pool,
Triton on the logical pool) and with / without R_V folded into v_proj; also reference vs reference with
R_V folded (how much the fold alone moves bf16 logits). One JSON line per variant.

    PYTHONPATH=src:tests python bench/diag_gpu_paged.py [--kinds qwen3,qwen2,llama]
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cache"))

from oscarkv.cache import OscarCache  # noqa: E402
from oscarkv.cache.graph import generate as graph_generate  # noqa: E402
from oscarkv.integrations.transformers import disable_oscar_attention, enable_oscar_attention  # noqa: E402
from test_gpu_paged import KW, _config, _model, _rotations  # noqa: E402
from tinymodels import oscar_generate  # noqa: E402

NEW = 24


def rel(a, b):
    return [round(float((x.float() - y.float()).abs().max() / x.float().abs().max()), 4) for x, y in zip(a, b)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kinds", default="qwen3,qwen2")
    a = ap.parse_args()
    for kind in a.kinds.split(","):
        cfg = _config(kind)
        model = _model(cfg)
        rot = _rotations(cfg)
        ids = torch.randint(1, 512, (1, 300), generator=torch.Generator().manual_seed(1)).cuda()
        ref = oscar_generate(model, OscarCache(cfg, "oscar", rotations=rot, backend="reference", **KW), ids,
                             max_new_tokens=NEW)
        ref_abs = oscar_generate(model, OscarCache(cfg, "oscar", rotations=rot, backend="reference", **KW), ids,
                                 absorb=True, max_new_tokens=NEW)
        print(json.dumps({"kind": kind, "variant": "reference absorbed vs reference", "rel": rel(ref.logits, ref_abs.logits)}), flush=True)
        for kb in ("cuda", "triton", "torch"):
            for absorb in (True, False):
                for graph in (True, False):
                    cache = OscarCache(cfg, "oscar", rotations=rot, max_tokens=512, kernel_backend=kb, **KW)
                    enable_oscar_attention(model, cache, absorb_v_into_o_proj=absorb)
                    try:
                        toks, logits = graph_generate(model, cache, ids, max_new_tokens=NEW, return_logits=True,
                                                      use_graph=graph)
                        rec = {"kind": kind, "variant": f"paged {kb} absorb={absorb} graph={graph}",
                               "layout": cache.paged.layout, "rel": rel(ref.logits, logits),
                               "tokens_equal_until": int((toks[0] != ref.sequences[0, 300:]).nonzero()[0, 0])
                               if (toks[0] != ref.sequences[0, 300:]).any() else NEW}
                    except Exception as e:
                        rec = {"kind": kind, "variant": f"paged {kb} absorb={absorb} graph={graph}", "error": repr(e)[:300]}
                    finally:
                        disable_oscar_attention(model)
                    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
