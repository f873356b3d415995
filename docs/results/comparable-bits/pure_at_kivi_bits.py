"""Pure-INT2 budget at KIVI's bits with today's oscar-plus (centered, one rotation per KV head):
bf16, kivi, oscar-plus with no window, and oscar-plus.at_bits(kivi's bits) (the row `oscar-kv run` adds).
usage: pure_at_kivi_bits.py MODEL CONTEXT ROTATIONS OUT.json"""
import json, sys
import torch
from oscarkv.data import load_text, token_ids
from oscarkv.dims import attention_dims
from oscarkv.eval.harness import evaluate
from oscarkv.methods import METHODS
from oscarkv.models import load_model
from oscarkv.rotation import RotationSet

torch.set_num_threads(1)
name, ctx, rot, out = sys.argv[1], int(sys.argv[2]), RotationSet.load(sys.argv[3]), sys.argv[4]
lm = load_model(name)
d = attention_dims(lm.model).head_dim
ids = token_ids(lm.tokenizer, load_text("pydoc-eval"), ctx)
kivi, plus = METHODS["kivi"].with_windows(0, 0, 1), METHODS["oscar-plus"].with_windows(0, 0, 1)
ms = [METHODS["bf16"], kivi, plus, plus.at_bits(kivi.bits_per_element(ctx, d), ctx, d)]
res = evaluate(lm.model, ids, ms, rotations=rot, context=ctx, progress=False)
res["windows"] = {m.name: (m.sink, m.recent, m.page) for m in ms}
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res, indent=1))
