"""Pure-INT2 comparison at KIVI's bits on Qwen2.5-Coder-1.5B (2048 tokens): OSCAR spends KIVI's residual bits on a BF16 window."""
import json, sys
from dataclasses import replace
import torch
from oscarkv.models import load_model
from oscarkv.data import load_text, token_ids
from oscarkv.methods import METHODS
from oscarkv.rotation import RotationSet
from oscarkv.eval.harness import evaluate

torch.set_num_threads(2)
rot = RotationSet.load(sys.argv[1])
lm = load_model("qwen2.5-coder-1.5b")
ctx = 2048
ids = token_ids(lm.tokenizer, load_text("pydoc-eval"), ctx)
P = METHODS["oscar-plus"]
ms = [METHODS["bf16"],
      METHODS["kivi"].with_windows(0, 0, 1),
      replace(P, name="oscar-plus s4 r60").with_windows(4, 60, 1),
      replace(P, name="oscar-plus r64").with_windows(0, 64, 1)]
res = evaluate(lm.model, ids, ms, rotations=rot, context=ctx, progress=False)
print(json.dumps(res, indent=1))
