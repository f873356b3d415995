import json, sys
from dataclasses import replace
import torch
from oscarkv.models import load_model
from oscarkv.data import load_text, token_ids
from oscarkv.methods import METHODS
from oscarkv.rotation import RotationSet
from oscarkv.eval.harness import evaluate

torch.set_num_threads(1)
rot = RotationSet.load(sys.argv[1])
lm = load_model()
ids = token_ids(lm.tokenizer, load_text("pydoc-eval"), 4096)
P = METHODS["oscar-plus"]
ms = [METHODS["bf16"],
      replace(P, name="oscar-plus r32").with_windows(0, 32, 1),
      replace(P, name="oscar-plus s4 r28").with_windows(4, 28, 1),
      replace(P, name="oscar-plus s16 r16").with_windows(16, 16, 1),
      replace(P, name="oscar-plus+chankeys64 s16 r16", key_axis="channel", group_size=64).with_windows(16, 16, 1)]
res = evaluate(lm.model, ids, ms, rotations=rot, context=4096, progress=False)
print(json.dumps(res, indent=1))
