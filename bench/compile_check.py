"""Compile the INT2 decode stage-1 kernels for sm_90 without a GPU and print registers / spills / smem.

    PYTHONPATH=src python3 bench/compile_check.py [--dump DIR]

Uses triton.compile with an explicit GPUTarget (needs only the ptxas bundled with triton).
"""
import argparse
import inspect
import os
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from oscarkv.kernels import triton_decode as td
from oscarkv.kernels import triton_decode_fma as tf

PTR = {"Q": "*bf16", "KC": "*u8", "VC": "*u8", "KW": "*i32", "VW": "*i32", "KS": "*fp16", "KZ": "*fp16", "VS": "*fp16", "VZ": "*fp16",
       "KH": "*bf16", "VH": "*bf16", "HP_BT": "*i32", "HP_LEN": "*i32", "Q_BT": "*i32", "Q_LEN": "*i32",
       "O": "*fp32", "LSE": "*fp32"}


def compile_one(kernel, consts, num_warps, num_stages, dump=None, tag=""):
    fn = kernel.fn if hasattr(kernel, "fn") else kernel
    names = list(inspect.signature(fn).parameters)
    sig, cst = {}, {}
    for n in names:
        if n in consts:
            sig[n] = "constexpr"
            cst[n] = consts[n]
        elif n in PTR:
            sig[n] = PTR[n]
        elif n == "scale_log2":
            sig[n] = "fp32"
        else:
            sig[n] = "i32"
    # strides divisible by 16 like the real launch (the specialisation triton does for ints % 16 == 0)
    attrs = {}
    src = ASTSource(kernel, sig, cst, attrs)
    target = GPUTarget("cuda", 90, 32)
    k = triton.compile(src, target=target, options=dict(num_warps=num_warps, num_stages=num_stages))
    md = k.metadata
    regs = getattr(k, "n_regs", None)
    try:
        k._init_handles()
    except Exception:
        pass
    if dump:
        os.makedirs(dump, exist_ok=True)
        for ext in ("ttgir", "ptx"):
            if ext in k.asm:
                open(os.path.join(dump, f"{tag}.{ext}"), "w").write(k.asm[ext])
    return k, md


def ptxas_info(k):
    import re, subprocess, tempfile
    import triton.backends.nvidia as nv
    ptx = k.asm["ptx"]
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    path = os.path.join(os.path.dirname(nv.__file__), "bin", "ptxas")
    r = subprocess.run([path, "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"], capture_output=True, text=True)
    return " ".join(l.strip() for l in r.stderr.splitlines() if "registers" in l or "spill" in l)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", default=None)
    ap.add_argument("--which", default="fma")
    a = ap.parse_args()
    base = dict(HKV=8, G=4, D=128, NG=1, BS=16, BN_HP=64, BH=16)
    if a.which in ("fma", "all"):
        for bn, w in ((16, 4), (8, 2), (4, 1), (32, 4)):
            c = dict(base, GP=4, BN_Q=bn, HP_DT=tl.bfloat16, TAU=8.0, R=int(os.environ.get("R", "1")), MAGIC=os.environ.get("MAGIC", "1") == "1", STAGES=int(os.environ.get("STAGES", "1")), WITH_HP=os.environ.get('WITH_HP', '1') == '1')
            k, md = compile_one(tf.decode_stage1_fma_kernel, c, w, int(os.environ.get("STAGES", "1")), a.dump, f"fma_bn{bn}_w{w}")
            print(f"fma BN={bn} warps={w}: {ptxas_info(k)}", flush=True)
    if a.which in ("mma", "all"):
        c = dict(base, BN_Q=128, QK_DT=tl.float16, PV_DT=tl.float16, ASM=True, HP_DT=tl.bfloat16, PREFETCH=True)
        k, md = compile_one(td.decode_stage1_kernel, c, 4, 3, a.dump, "mma")
        print(f"mma BN=128 warps=4: {ptxas_info(k)}", flush=True)
