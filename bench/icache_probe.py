"""Instruction-fetch probe (issue 7): cold vs warm cycles per instruction of straight-line code, one CTA per SM.

    python bench/icache_probe.py [--sizes 1024,2048,...] [--json out.json]

Builds bench/icache_probe.cu with nvcc for N = 1024 / 2048 / 3072 / 4096 / 8192 FFMAs (16-128 KB of code), launches
one CTA per SM with 1 or 8 warps, 3 passes per launch, 20 launches back to back, and prints the median cycles per
instruction of pass 0 (cold in that launch) and pass 1-2 (warm), first launch and later ones. If pass 0 of every
launch is several times slower than pass 1, code that runs once per CTA (the decode's epilogue and merge) is paced
by instruction fetch, and its length, not its arithmetic, sets its time.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def build(n: int) -> ctypes.CDLL:
    so = Path(tempfile.mkdtemp()) / f"icache_{n}.so"
    subprocess.run(["nvcc", "-O3", "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90a,code=sm_90a",
                    f"-DNFMA={n}", "-o", str(so), str(HERE / "icache_probe.cu")], check=True)
    lib = ctypes.CDLL(str(so))
    lib.launch_straight.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_void_p]
    return lib


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--sizes", type=lambda x: [int(v) for v in x.split(",")], default=[1024, 2048, 3072, 4096, 8192],
                    help="FFMAs per pass (16 bytes of code each), comma-separated")
    a = ap.parse_args()
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    out = torch.zeros(4, device=dev)
    rows = []
    for n in a.sizes:
        lib = build(n)
        for threads in (32, 256):
            cyc = torch.zeros(sms * 8, dtype=torch.int64, device=dev)
            per = []
            stream = torch.cuda.current_stream().cuda_stream
            for it in range(20):
                lib.launch_straight(out.data_ptr(), cyc.data_ptr(), 3, sms, threads, stream)
                torch.cuda.synchronize()
                per.append(cyc.view(sms, 8)[:, :3].float().cpu())
            cpi = lambda t, r: statistics.median((t[:, r] / n).tolist())  # noqa: E731
            row = dict(nfma=n, code_kb=n * 16 // 1024, threads=threads,
                       first_launch=[round(cpi(per[0], r), 3) for r in range(3)],
                       later_launches=[round(statistics.median(cpi(p, r) for p in per[1:]), 3) for r in range(3)])
            rows.append(row)
            print(f"N={n:5d} ({row['code_kb']:3d} KB code) {threads:3d} threads: cycles/instr pass 0/1/2 first launch "
                  f"{row['first_launch']}, later launches {row['later_launches']}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(dict(device=torch.cuda.get_device_name(dev), rows=rows), indent=1))


if __name__ == "__main__":
    main()
