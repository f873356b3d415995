"""Decode-step appends at batch B, eagerly, for Nsight Compute (device machine, repo root): the set-up of
bench_decode.bench_append (Qwen3-8B shape, one layer), steps without a page demotion, R_K fused or not:

    ncu --clock-control none -k regex:append_kernel --launch-skip 4 --launch-count 1 \\
        --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \\
        python3 bench/ncu_append.py 59 [fused]
"""

import sys

import torch

sys.path.insert(0, "bench")
from bench_decode import append_steps  # noqa: E402

B = int(sys.argv[1])
rotation = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "none" else None
fns, n_dem = append_steps(B, torch.device("cuda"), "cuda", steps=6, rotation=rotation)
assert n_dem == 0  # lengths 361..366: the next page is demoted at 368
for f in fns:
    f()
torch.cuda.synchronize()
