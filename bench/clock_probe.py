"""SM clock and board power while one INT2 decode call shape runs back to back, per kernel probe (device machine,
repo root; issue 7: is the full kernel slower than max(loads only, math only) because it runs at lower clocks?):

    python3 bench/clock_probe.py 131072 32 0,4 [--modes 0,1,7] [--seconds 4] [--sequential] [--no-evict-first]

Variants as in bench_decode. For each probe mode (0 = full kernel, 1 = INT2
loads only, 6 = no unpack, 7 = math only, 8 = probe 1's loads into registers; bare reads of the same number of bytes,
264 CTAs x 1024 threads: -1 = bench_decode's read floor (one grid-stride sweep) over random bytes, -2 = one contiguous
stream per warp over random bytes, -3 = the sweep over zero bytes; the pool's own INT2 records read the way the
kernel's lanes read a tile, one KV head's records in block-table order as a split reads them, nothing else
(bench_decode's --read-records kernel): -4 at 2 CTAs x 256 threads per SM, -5 at the batch-32 kernel's 4 x 128) the
call is replayed
for --seconds while nvidia-smi samples the SM clock and power every 100 ms; prints the mean time per call and the
median clock / power of the samples taken while that mode ran.
"""
import argparse
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, "bench")
import bench_decode  # noqa: E402
from bench_decode import HKV, HQ, PROBES, D, copies_for, int2_bytes, make_mixed, read_floor_once, read_records_once  # noqa: E402

from oscarkv.kernels import DecodePlan  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("L", type=int)
ap.add_argument("B", type=int)
ap.add_argument("variants", help="comma-separated kernel variants, each timed with every mode")
ap.add_argument("--modes", default="0,1,7")
ap.add_argument("--seconds", type=float, default=4.0)
ap.add_argument("--sequential", action="store_true", help="INT2 block ids in pool order (default: a random permutation)")
ap.add_argument("--no-evict-first", action="store_true", help="CudaDecodeConfig.l2_evict_first=False")
a = ap.parse_args()
modes = [int(x) for x in a.modes.split(",")]
variants = a.variants.split(",")
try:
    [bench_decode.variant_spec(v) for v in variants]
except ValueError as e:
    ap.error(f"variants: {e}")
BARE = {-1, -2, -3, -4, -5}
if set(modes) - BARE - {0, *PROBES}:
    ap.error(f"--modes: unknown {sorted(set(modes) - BARE - {0, *PROBES})}; choose from {sorted(BARE | {0, *PROBES})}")
bench_decode.EVICT = not a.no_evict_first
pool, metas = make_mixed(a.B, a.L, 1, torch.device("cuda"), "tile16", sequential=a.sequential)
q = torch.randn(a.B, HQ, D, device="cuda", dtype=torch.bfloat16)
out = torch.empty_like(q)
cfgs = {v: bench_decode.ours_config(v) for v in variants}
plans = {v: DecodePlan(a.B, HQ, HKV, D, metas[0], "cuda", torch.bfloat16, c) for v, c in cfgs.items()}
nbytes = int2_bytes(a.B, a.L)
n16 = -(-nbytes // 16)
bufs = [torch.empty(n16 * 16, dtype=torch.uint8, device="cuda").random_(0, 256)
        for _ in range(copies_for(nbytes) if {-1, -2} & set(modes) else 0)]  # random bytes (modes -1, -2 only)
zeros = [torch.zeros(n16 * 16, dtype=torch.uint8, device="cuda") for _ in range(copies_for(nbytes) if -3 in modes else 0)]
sink = torch.zeros(1, dtype=torch.int32, device="cuda")
calls = [0]
sms = torch.cuda.get_device_properties(0).multi_processor_count
table = metas[0].int2_block_tables.reshape(-1).contiguous()  # records of modes -4 / -5


def run(v, mode):
    if mode >= 0:
        plans[v].run(q, pool, metas[0], 1.0, out=out, _probe=mode)
    elif mode in (-4, -5):  # the pool's records (one copy: at batch 32 it is far larger than L2)
        ctas, threads = (2 * sms, 256) if mode == -4 else (4 * sms, 128)
        read_records_once(pool, table, 1, ctas, threads, sink)
    else:  # a bare read of the same bytes, a different copy each call (misses L2)
        calls[0] += 1
        src = zeros if mode == -3 else bufs
        read_floor_once(src[calls[0] % len(src)], n16, sink, 264, 1024, pattern=1 if mode == -2 else 0)


smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                        "-lms", "100"], stdout=subprocess.PIPE, text=True)
spans = []
for v, mode in [(v, m) for v in variants for m in modes if m >= 0 or v == variants[0]]:
    for _ in range(3):
        run(v, mode)
    torch.cuda.synchronize()
    t0, n = time.time(), 0
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    while time.time() - t0 < a.seconds:
        for _ in range(20):
            run(v, mode)
        n += 20
        torch.cuda.synchronize()
    e1.record()
    torch.cuda.synchronize()
    spans.append((v, mode, t0 + 0.5, time.time(), e0.elapsed_time(e1) * 1e3 / n))
    time.sleep(0.5)
smi.terminate()
rows = []
for line in smi.stdout.read().splitlines():
    ts, clk, pw = (x.strip() for x in line.split(","))
    t = time.mktime(time.strptime(ts.split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + ts.split(".")[1])
    rows.append((t, float(clk), float(pw)))
for v, mode, t0, t1, us in spans:  # (nvidia-smi stamps local time; mktime reads it as such)
    s = [(c, p) for t, c, p in rows if t0 <= t <= t1]
    clk = statistics.median(c for c, _ in s) if s else float("nan")
    pw = statistics.median(p for _, p in s) if s else float("nan")
    print(f"L={a.L} B={a.B} v{v} probe {mode}: {us:.1f} us per call, SM clock {clk:.0f} MHz, "
          f"power {pw:.0f} W ({len(s)} samples)")
