"""Experiment: OSCAR's rotation + centering with KIVI-style per-channel key groups (pure INT2 and default windows)."""
import json, sys
from dataclasses import replace
import torch
from oscarkv.models import load_model
from oscarkv.data import load_text, token_ids
from oscarkv.methods import METHODS
from oscarkv.rotation import RotationSet
from oscarkv.eval.harness import evaluate

torch.set_num_threads(1)
mode = sys.argv[1]  # pure | default
rot = RotationSet.load(sys.argv[2])
lm = load_model()
ids = token_ids(lm.tokenizer, load_text("pydoc-eval"), 4096)

P, K = METHODS["oscar-plus"], METHODS["kivi"]
G = 64
ms = [METHODS["bf16"],
      replace(P, name="oscar-plus"),
      replace(P, name="oscar-plus+chankeys64", key_axis="channel", group_size=G),
      replace(P, name="oscar-plus+chankeys32", key_axis="channel", group_size=32),
      replace(METHODS["hadamard"], name="hadamard-c+chankeys64", center="on", key_axis="channel", group_size=G),
      replace(K, name="kivi64", group_size=G),
      replace(K, name="kivi64+center", group_size=G, center="on")]
if mode == "pure":
    ms = [m if m.name == "bf16" else m.with_windows(0, 0, 1) for m in ms]
res = evaluate(lm.model, ids, ms, rotations=rot, context=4096, progress=False)
print(json.dumps(res, indent=1))
