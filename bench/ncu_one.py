"""One CUDA INT2 decode call at a given shape, for Nsight Compute (device machine, repo root):

    ncu --clock-control none -k regex:int2_decode --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
        python3 bench/ncu_one.py 131072 1 [variant] [float16|log8]
"""

import sys

import torch

sys.path.insert(0, "bench")
import bench_decode  # noqa: E402
from bench_decode import HKV, HQ, D, make_mixed  # noqa: E402

from oscarkv.kernels import CudaDecodeConfig, DecodePlan, decode_attention  # noqa: E402

L, B = int(sys.argv[1]), int(sys.argv[2])
var = int(sys.argv[3]) if len(sys.argv) > 3 else 1
bench_decode.SCALE = sys.argv[4] if len(sys.argv) > 4 else "float16"  # the records' scale format (make_mixed reads it)
pool, metas = make_mixed(B, L, 1, torch.device("cuda"), "tile16")
q = torch.randn(B, HQ, D, device="cuda", dtype=torch.bfloat16)
plan = DecodePlan(B, HQ, HKV, D, metas[0], "cuda", torch.bfloat16, CudaDecodeConfig(variant=var),
                  scale_dtype=bench_decode.SCALE)
for _ in range(3):
    decode_attention(q, pool, metas[0], plan=plan)
torch.cuda.synchronize()
