# Qwen calibration for the 4096 runs: the same statistics/rotation files `oscar-kv run` builds
# (collect_stats on 4096 pydoc-calib tokens + cli.commands._run_rotations), saved as a run dir that
# `oscar-kv run --reuse-rotations` reads; plus the stats (torch.save) and a centered per-KV-head file.
import sys, time, torch
from pathlib import Path
from oscarkv.cli.commands import _load, _run_rotations
from oscarkv.calibrate import collect_stats, build_rotations
from oscarkv.data import builtin_text, token_ids
model, ntok, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
out.mkdir(parents=True, exist_ok=True)
lm = _load(model)
ids = token_ids(lm.tokenizer, builtin_text("pydoc-calib"), ntok, what="calib")
t = time.time()
stats = collect_stats(lm.model, ids, seq_len=min(1024, ntok))
print(f"stats {time.time()-t:.1f}s", flush=True)
torch.save(stats, out / "stats.pt")
rots = _run_rotations(lm, stats, "pydoc-calib")
for k, f in {"paper": "rotations", "centered": "rotations-centered", "plus": "rotations-plus", "plus-alt": "rotations-plus-alt"}.items():
    rots[k].save(out / f"{f}.safetensors")
rs = build_rotations(stats, model_id=lm.model_id, center=True, per_head=True)
rs.meta["calib_data"] = "pydoc-calib"
rs.save(out / "rotations-perhead.safetensors")
print("done", flush=True)
