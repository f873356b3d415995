"""Count SASS instructions of the INT2 decode loop (issue 7): reproducible per-tile instruction counts.

    python bench/sass_count.py [--src FILE.cu | --cubin X.cubin] [--kernel SUBSTR] [--mma-per-tile N] [--min-tiles N] [--hist]

    # before / after of issue 7 (commit e6ce31c = the kernel of BENCHMARKS.md's first 2026-12-03 section):
    git show e6ce31c:src/oscarkv/kernels/cuda/int2_paged.cu > /tmp/old.cu
    python bench/sass_count.py --src /tmp/old.cu --kernel bfloat16Li128ELi4ELi1ELi3ELi8E --mma-per-tile 16 --hist
    python bench/sass_count.py --kernel bfloat16Li128ELi4ELi4ELi4ELi0E --hist    # today's variant 0: 161 per tile
    # one variant only (seconds): variant 7 on log8 records (template SF = 1, the last argument): 198 per tile,
    # 163 on fp16 records (forty-ninth session)
    python bench/sass_count.py --only 128,7 --kernel bfloat16Li128ELi8ELi2ELi8ELi0ELi0ELi1E --hist

Without --cubin it compiles src/oscarkv/kernels/cuda/int2_paged.cu with cuda_ops' flags for one arch into a
cubin (no GPU needed; cuobjdump is taken from PATH or from triton's bundled copy). For each matching
kernel it finds the loop that holds the INT2 tile math (the innermost backward branch whose body holds the
most HMMA/LOP3) and prints: static instructions in the loop body, the tiles one iteration covers (HMMA
count / MMAs per tile), per-tile count, the body's forward-branch regions (conditional blocks, e.g. the
softmax rescale) and, with --hist, an opcode histogram. The "hot path" count leaves out conditional
blocks whose skip branch jumps over them (rescale / probe / refill tails), i.e. a steady-state iteration.
"""
from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src/oscarkv/kernels/cuda/int2_paged.cu"
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")


def tool(name: str) -> str:
    p = shutil.which(name)
    if p:
        return p
    try:
        import triton  # bundled nvidia tools
        q = Path(triton.__file__).parent / "backends/nvidia/bin" / name
        if q.exists():
            return str(q)
    except ImportError:
        pass
    sys.exit(f"{name} not found")


def only_variant(src: Path, head_dim: int, variant: int) -> Path:
    """A copy of the source whose dispatch table instantiates one decode variant (bf16 and fp16, both scale
    formats): ~7 s to compile instead of ~2.5 min for the whole table (the kernel itself is unchanged)."""
    out, table = [], False
    for line in src.read_text().split("\n"):
        if line.startswith("#define OSCAR_TABLE("):
            table = True
        elif table and "variant ==" in line:
            if f"head_dim == {head_dim} && variant == {variant})" not in line:
                if not line.rstrip().endswith("\\"):
                    out.append("")  # the macro's last line: end it
                    table = False
                continue
        else:
            table = False
        out.append(line)
    dst = Path(tempfile.mkdtemp()) / "one_variant.cu"
    dst.write_text("\n".join(out))
    return dst


def compile_cubin(arch: str, extra: list[str], src: Path = SRC) -> Path:
    out = Path(tempfile.mkdtemp()) / "k.cubin"
    cmd = ["nvcc", "-O3", "-std=c++17", "-lineinfo", "-gencode", f"arch=compute_{arch[3:]},code={arch}", "-cubin",
           "-o", str(out), str(src), *extra]
    subprocess.run(cmd, check=True)
    return out


def functions(sass: str):
    cur, body = None, []
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if cur:
                yield cur, body
            cur, body = m.group(1), []
            continue
        m = LINE.search(line)
        if m and cur:
            body.append((int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4).strip()))
    if cur:
        yield cur, body


def analyse(name: str, ins, mma_per_tile: int, hist: bool, min_tiles: int = 1):
    addr = {a: i for i, (a, *_ ) in enumerate(ins)}
    loops = []
    for i, (a, pred, op, args) in enumerate(ins):
        if op.startswith("BRA"):
            m = re.match(r"(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", args)
            if m and m.group(1):
                tgt = int(m.group(1), 16)
                if tgt <= a and tgt in addr:
                    loops.append((addr[tgt], i))
    best = None
    for lo, hi in loops:
        body = ins[lo:hi + 1]
        n_mma = sum(op.startswith(("HMMA", "IMMA")) for _, _, op, _ in body)
        n_lop = sum(op.startswith("LOP3") for _, _, op, _ in body)
        n_hfma = sum(op.startswith("HFMA2") for _, _, op, _ in body)
        n_ldgsts = sum(op.startswith("LDGSTS") for _, _, op, _ in body)
        # the INT2 loop: a tile's MMAs, its code masking (48 LOP3 at head_dim 128 since the u8 K side; the BF16
        # loop has ~32) and its cp.async refill (which the math-only probe's copy of the loop lacks)
        if n_mma < min_tiles * mma_per_tile or n_lop + n_hfma < 48 or n_ldgsts == 0:
            continue
        key = hi - lo
        if best is None or key < best[0]:  # the innermost such loop (the chunk loops around it hold copies)
            best = (key, lo, hi, n_mma)
    if best is None:
        print(f"{name}: no INT2 loop found")
        return
    _, lo, hi, n_mma = best
    body = ins[lo:hi + 1]
    # conditional regions: forward branches inside the body that skip a block
    skipped = set()
    regions = []
    for j, (a, pred, op, args) in enumerate(body):
        if op.startswith("BRA") and pred:
            m = re.match(r"0x([0-9a-f]+)", args)
            if m:
                tgt = int(m.group(1), 16)
                if a < tgt <= body[-1][0]:
                    k = addr[tgt] - lo
                    blk = body[j + 1:k]
                    ops = collections.Counter(o.split(".")[0] for _, _, o, _ in blk)
                    regions.append((a, tgt, len(blk), ops.most_common(4)))
                    if not any(o.startswith(("HMMA", "IMMA")) for _, _, o, _ in blk):  # the tile math is the hot path
                        skipped.update(range(j + 1, k))
    tiles = n_mma / mma_per_tile
    hot = len(body) - len(skipped)
    print(f"{name}\n  loop body 0x{body[0][0]:x}-0x{body[-1][0]:x}: {len(body)} static instr, {n_mma} HMMA + IMMA "
          f"= {tiles:g} tile(s) -> {len(body) / tiles:.0f} per tile; hot path (conditional blocks skipped) "
          f"{hot} -> {hot / tiles:.0f} per tile")
    for a, tgt, n, ops in regions:
        print(f"    cond block 0x{a:x}->0x{tgt:x}: {n} instr {ops}")
    hot_ops = collections.Counter(body[j][2].split(".")[0] for j in range(len(body)) if j not in skipped)
    if hist:
        print("  hot-path opcodes per tile:", ", ".join(f"{o} {c / tiles:g}" for o, c in hot_ops.most_common()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubin")
    ap.add_argument("--src", help="a .cu file to compile instead of the repo's int2_paged.cu")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--kernel", default="int2_decode_kernelI13__nv_bfloat16Li128")
    ap.add_argument("--mma-per-tile", type=int, default=14,
                    help="HMMA + IMMA per 16-token tile at head_dim 128: 14 since the eleventh session (4 u8 K + 8 V + l/z + "
                    "offset), 18 before (8 fp16 K), 16 before the eighth")
    ap.add_argument("--hist", action="store_true")
    ap.add_argument("--min-tiles", type=int, default=1, help="the loop must hold at least this many tiles' MMAs (unrolled loops)")
    ap.add_argument("--only", metavar="HEAD_DIM,VARIANT", help="compile only this decode variant (e.g. 128,7: seconds, not "
                    "minutes); the kernel names then match as usual, e.g. --kernel bfloat16Li128ELi8ELi2ELi8ELi0ELi0ELi1E")
    ap.add_argument("nvcc_extra", nargs="*")
    a = ap.parse_args()
    src = Path(a.src) if a.src else SRC
    if a.only and not a.cubin:
        src = only_variant(src, *(int(x) for x in a.only.split(",")))
    cubin = Path(a.cubin) if a.cubin else compile_cubin(a.arch, a.nvcc_extra, src)
    sass = subprocess.run([tool("cuobjdump"), "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    for name, ins in functions(sass):
        if a.kernel in name:
            analyse(name, ins, a.mma_per_tile, a.hist, a.min_tiles)


if __name__ == "__main__":
    main()
