"""One INT2 decode call at a given shape, for Nsight Compute:

    ncu --clock-control none -k regex:decode_stage1 --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
        python3 bench/ncu_one.py 131072 1
"""

import sys

import torch

sys.path.insert(0, "bench")
from bench_decode import HQ, D, make_mixed  # noqa: E402

from oscarkv.kernels import decode_attention  # noqa: E402

L, B = int(sys.argv[1]), int(sys.argv[2])
cfg = eval(sys.argv[3]) if len(sys.argv) > 3 else {}
pool, metas = make_mixed(B, L, 1, torch.device("cuda"))
q = torch.randn(B, HQ, D, device="cuda", dtype=torch.bfloat16)
for _ in range(2):  # launch 0 compiles, launch 1 is profiled
    decode_attention(q, pool, metas[0], backend="triton", **cfg)
torch.cuda.synchronize()
