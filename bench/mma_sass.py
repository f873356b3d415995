"""Which SASS one warp-level ``mma.sync`` becomes on a given arch (no GPU needed): native tensor-core op or emulation.

    python bench/mma_sass.py                      # the operand types an INT2 decode loop could feed, on sm_90a and sm_89
    python bench/mma_sass.py --arch sm_90a --types f32.e4m3.e4m3.f32

Compiles a kernel holding one ``mma.sync.aligned.m16n8k{16,32}.row.col.<types>`` with nvcc into a cubin and prints
its MMA and conversion instructions (cuobjdump: bench/sass_count.py's ``tool``). Why it exists (issue 7, forty-sixth
session): an fp8 V side (codes ORed under an e4m3 exponent, m16n8k32 over two tiles) would halve the V-side MMAs and
take ~8 of the unpack's 36 instructions per tile, but on sm_90a nvcc 13.0 lowers the e4m3 ``mma.sync`` to
12 ``F2FP.F16.E4M3.UNPACK_B`` + 2 ``HMMA.16816`` (``QMMA`` only on sm_89): on Hopper fp8 tensor cores are reached
through ``wgmma`` only, so that path adds instructions there. u8 x s8 (the K side) is a native ``IMMA.16832``.
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import tempfile
from pathlib import Path

from sass_count import compile_cubin, tool

# (PTX types, k, accumulator register constraint)
TYPES = {"f32.f16.f16.f32": (16, "f"), "f32.e4m3.e4m3.f32": (32, "f"), "s32.u8.s8.s32": (32, "r"),
         "s32.u8.u8.s32": (16, "r")}

KERNEL = """#include <cstdint>
extern "C" __global__ void one_mma(const uint32_t* a, const uint32_t* b, {acc}* d) {{
  int l = threadIdx.x;
  {acc} c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  uint32_t a0 = a[l], a1 = a[l + 32], a2 = a[l + 64], a3 = a[l + 96], b0 = b[l], b1 = b[l + 32];
  asm volatile("mma.sync.aligned.m16n8k{k}.row.col.{types} {{%0,%1,%2,%3}}, {{{a_regs}}}, {{{b_regs}}}, {{%0,%1,%2,%3}};"
               : "+{c}"(c0), "+{c}"(c1), "+{c}"(c2), "+{c}"(c3) : {operands});
  d[l] = c0 + c1 + c2 + c3;
}}
"""


def sass_of(types: str, arch: str) -> list[str]:
    """The MMA / conversion SASS lines of one mma.sync of ``types`` compiled for ``arch``."""
    if types not in TYPES:
        raise SystemExit(f"unknown --types {types!r}; choose from {', '.join(TYPES)}")
    k, c = TYPES[types]
    # A: 4 registers (k16 of 16-bit types / k32 of 8-bit types) or 2 (k16 of 8-bit types); B: half as many
    na = 2 if (k == 16 and "8" in types.split(".")[1]) else 4
    nb = na // 2
    a_regs = ",".join(f"%{4 + i}" for i in range(na))
    b_regs = ",".join(f"%{4 + na + i}" for i in range(nb))
    regs = [f"a{i}" for i in range(na)] + [f"b{i}" for i in range(nb)]
    src = KERNEL.format(acc="float" if c == "f" else "int", k=k, types=types, a_regs=a_regs, b_regs=b_regs, c=c,
                        operands=", ".join(f'"r"({r})' for r in regs))
    path = Path(tempfile.mkdtemp()) / "one_mma.cu"
    path.write_text(src)
    cubin = compile_cubin(arch, ["-w"], src=path)
    sass = subprocess.run([tool("cuobjdump"), "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    ops = (m.group(1).strip() for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+([A-Z][^;]*);", sass))
    return [op for op in ops if re.match(r"[A-Z]*MMA|F2FP|I2F|HADD2", op)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="sm_90a,sm_89", help="comma-separated nvcc archs (default sm_90a,sm_89)")
    ap.add_argument("--types", default=",".join(TYPES), help=f"comma-separated PTX mma types (default all: {', '.join(TYPES)})")
    a = ap.parse_args()
    for arch in a.arch.split(","):
        for types in a.types.split(","):
            lines = sass_of(types, arch)
            counts = collections.Counter(op.split()[0] for op in lines)
            print(f"{arch} mma.sync {types}: {len(lines)} instructions ("
                  + ", ".join(f"{n} {op}" for op, n in sorted(counts.items())) + ")")


if __name__ == "__main__":
    main()
