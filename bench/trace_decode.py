"""Timeline of one INT2 decode call's start and end, recorded inside the kernel (issue 7, the batch-1 fixed cost;
GPU machine, repo root):

    python3 bench/trace_decode.py --points 131072x1,32768x1 --out $OUT/trace.json

Why: the early-return probes (bench_decode --diag) say what the start and the end of a batch-1 call cost in total
(H100, thirty-first session: 128K start 5.5 us, end 4.8 = epilogue 1.7 + merge 3.1), not where inside them the
time goes, which is what a change to the call's structure needs. This builds a copy of kernels/cuda/int2_paged.cu
with OSCARKV_TRACE defined (thread 0 of every CTA records %globaltimer and clock64 at eight events, lane 0 of every
warp the end of its tile loop; the events are listed in the .cu), replays decode calls as bench_decode times them
(Qwen3-8B attention shape, DecodePlan's default config with early reads), and reads the last call's records:

* start: CTA entry times (the grid's dispatch spread) and the PDL wait's return;
* stream end: the warps' loop ends (first, median, last), each CTA's slowest warp;
* end, in the last CTA of each (sequence, KV head): all warps' partials in shared memory (2), the CTA's partial
  written (3), the arrival atomic returned (4), its partial-output loads issued (5; up to the fifty-second session's
  kernel: the LSEs in shared memory), weights in shared memory (6), output stored (7), as
  cycles of its SM (clock64, exact within a CTA) and ns, and the last event after the last warp's loop end.
  With ``--poll-merge`` the merging CTA is slot 0's: 4 is its flag's store, 5 its last fold done (it waits for the
  others' flags in between), 6 and 7 its output stored.

Modes: ``b2b`` (decode calls back to back, PDL on: bench_decode's number), ``no_pdl`` (each call alone),
``chain`` (append with R_K fused -> decode -> o_proj GEMV, the layer's order). The trace build's registers differ
from the shipped kernel's (a few bytes of spill in some variants), so its times are close to, not equal to, the
shipped kernel's; each mode also prints the graph-timed time per call of the traced build.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_decode as bd  # noqa: E402
import decode_chain as dc  # noqa: E402

from oscarkv.fileio import source_commit  # noqa: E402
from oscarkv.kernels import cuda_ops  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CTAS, EVENTS, WARPS = 4096, 8, 16  # the .cu's kTraceCtas, events per CTA, warps per CTA recorded


def use_trace_build(kernel: Path | None = None) -> Path:
    """Point cuda_ops at a trace build: the kernel source (default this tree's) with OSCARKV_TRACE defined, written
    to a temporary file named after it (the library cache is keyed by the text, so a carried .kcache built from the
    same file is reused)."""
    kernel = Path(kernel or ROOT / "src/oscarkv/kernels/cuda/int2_paged.cu")
    if not kernel.is_file():
        raise SystemExit(f"kernel source {kernel} not found: give --src a .cu file (default: this tree's kernel)")
    src = Path(tempfile.gettempdir()) / "oscarkv_trace" / f"{kernel.stem}_trace.cu"
    src.parent.mkdir(exist_ok=True)
    src.write_text("#define OSCARKV_TRACE 1\n" + kernel.read_text())
    cuda_ops._SRC, cuda_ops._LIB = src, None
    return src


def read_trace(clear: bool = False):
    """(globaltimer [CTAS, 8], clock64 [CTAS, 8], warp loop ends [CTAS, 16], SM ids [CTAS]) of the trace build;
    ``clear`` zeroes them instead."""
    n = CTAS * 2 * EVENTS * 8 + CTAS * WARPS * 8 + CTAS * 4
    buf = (ctypes.c_char * n)()
    err = cuda_ops.lib().oscar_trace(buf, int(clear))
    if err != 0:
        raise SystemExit(f"oscar_trace returned {err}: the kernel library ({cuda_ops._SRC}) is not a trace build")
    if clear:
        return None
    raw = torch.frombuffer(bytearray(buf), dtype=torch.uint8)
    a = CTAS * 2 * EVENTS * 8
    ev = raw[:a].view(torch.int64).view(CTAS, 2, EVENTS)
    warp = raw[a:a + CTAS * WARPS * 8].view(torch.int64).view(CTAS, WARPS)
    sm = raw[a + CTAS * WARPS * 8:].view(torch.int32)
    return ev[:, 0], ev[:, 1], warp, sm


def summarize(gt, ck, warp, sm, nwarp: int) -> dict:
    """Times in us from the first CTA's entry (globaltimer), per-event cycle deltas of the merging CTAs."""
    live = (gt[:, 0] > 0).nonzero().flatten()
    t0 = int(gt[live, 0].min())
    us = lambda x: (x - t0) / 1e3  # noqa: E731

    def spread(v):
        v = sorted(float(x) for x in v)
        return dict(first=v[0], median=v[len(v) // 2], last=v[-1], n=len(v)) if v else {}

    ends = warp[live, :nwarp]
    ends = ends[ends > 0]
    wend = warp[live, :nwarp].clamp(min=0).max(1).values  # each CTA's slowest warp's loop end (0: no loop)
    worked = live[wend > 0]  # CTAs that ran the loop (not returned as unused splits)
    cta_end = wend[wend > 0]
    # the merging CTAs: events 5-7 are written only there, so a CTA that merged in an earlier call of the sequence
    # still holds that call's (older than its own entry in the last call)
    last = live[gt[live, 7] > gt[live, 0]]
    out = dict(ctas=len(live), ctas_working=len(worked), sms=len(set(sm[live].tolist())),
               entry_us=spread(us(gt[live, 0])), pdl_wait_done_us=spread(us(gt[live, 1][gt[live, 1] > 0])),
               warp_loop_end_us=spread(us(ends)), cta_loop_end_us=spread(us(cta_end)),
               kernel_last_event_us=float(us(gt[live].max())))
    stream_end = float(us(ends.max())) if len(ends) else 0.0
    merges = []
    for c in last.tolist():
        cyc = ck[c]
        span_ns = float(gt[c, 7] - gt[c, 0])
        ghz = float(cyc[7] - cyc[0]) / span_ns if span_ns > 0 else float("nan")  # this SM's clock over the CTA
        d = {f"{a}->{b}": float(cyc[b] - cyc[a]) for a, b in ((2, 3), (3, 4), (4, 5), (5, 6), (6, 7))}
        merges.append(dict(cta=c, sm=int(sm[c]), ghz=ghz, cycles=d, ns={k: v / ghz for k, v in d.items()},
                           own_loop_end_us=float(us(warp[c, :nwarp].max())),
                           events_us=[float(us(x)) if x > 0 else None for x in gt[c].tolist()]))
    # per CTA (index = blockIdx.y * gridDim.x + blockIdx.x): SM, entry, PDL wait done, slowest warp's loop end (us;
    # -1 where not recorded), to tell late starters, slow SMs and slow splits apart in the tail
    out["per_cta"] = [[c, int(sm[c]), round(float(us(gt[c, 0])), 3),
                       round(float(us(gt[c, 1])), 3) if gt[c, 1] > 0 else -1,
                       round(float(us(w)), 3) if w > 0 else -1] for c, w in zip(live.tolist(), wend.tolist())]
    out["stream_end_us"] = stream_end
    out["end_after_stream_us"] = out["kernel_last_event_us"] - stream_end
    out["merges"] = merges
    if merges:
        keys = merges[0]["ns"].keys()
        out["merge_ns_median"] = {k: statistics.median(m["ns"][k] for m in merges) for k in keys}
        out["last_merge"] = max(merges, key=lambda m: m["events_us"][7] or 0)
    return out


def sm_balance(per_cta, n_hp: int, bh: int) -> dict:
    """The SMs' INT2 loop ends (10% / median / last, us) from ``summarize``'s per-CTA records of a split-major grid
    of bh (sequence, KV head) pairs with n_hp BF16-tier splits, and the end the same SMs would reach with the work
    shared at their own rates: SM s, with w_s INT2 CTAs from its first PDL wait a_s to its last loop end e_s, runs
    at w_s / (e_s - a_s) CTAs per us; all of them together finish sum w_s CTAs by a + sum w_s / sum rates (a: the
    median start). The gap to the last end is what balancing the stream across SMs could give at most."""
    by_sm: dict[int, list] = {}
    for c, sm, _entry, pdl, end in per_cta:
        if c // bh >= n_hp and pdl > 0 and end > 0:  # split-major: split = c // bh; INT2 CTAs that ran the loop
            by_sm.setdefault(sm, []).append((pdl, end))
    if not by_sm:
        return {}
    starts, ends, work, rate = [], [], 0, 0.0
    for v in by_sm.values():
        a, e = min(x[0] for x in v), max(x[1] for x in v)
        starts.append(a)
        ends.append(e)
        work += len(v)
        rate += len(v) / max(e - a, 1e-9)
    ends.sort()
    n = len(ends)
    balanced = sorted(starts)[n // 2] + work / rate
    return dict(sms=n, sm_end_p10=ends[int(0.1 * (n - 1))], sm_end_median=ends[n // 2], sm_end_last=ends[-1],
                balanced_end=balanced, gain_us=ends[-1] - balanced)


def trace_point(B: int, L: int, dev, modes, variant: int | None = None) -> dict:
    lc = dc.LayerCalls(B, L, dev, variant=variant)
    plan = lc.plans[0]
    nwarp = cuda_ops.lib().oscar_int2_decode_warps(cuda_ops._DT[torch.bfloat16], bd.D, plan.variant, 0)
    res = dict(L=L, B=B, bytes=lc.nbytes, splits=f"{plan.n_hp}+{plan.n_int2}", variant=plan.variant)
    for mode in modes:
        # chain: the sequence ends with a GEMV, so the last decode traced is the one of the last layer
        fns = lc.seq(lc.apps, lc.dec, lc.gemv) if mode == "chain" else lc.dec
        pdl = cuda_ops.USE_PDL
        cuda_ops.USE_PDL = mode != "no_pdl"
        try:
            read_trace(clear=True)
            t = bd.time_calls(fns) * 1e6
            torch.cuda.synchronize()
            gt, ck, warp, sm = read_trace()
        finally:
            cuda_ops.USE_PDL = pdl
        s = summarize(gt, ck, warp, sm, nwarp)
        s["time_per_call_us"] = t
        if plan.split_major:
            s["sm_balance"] = sm_balance(s["per_cta"], plan.n_hp, B * bd.HKV)
        res[mode] = s
        lm = s.get("last_merge", {})
        print(f"trace L={L} B={B} {mode}: {t:.1f} us per call ({'sequence' if mode == 'chain' else 'decode'}); "
              f"entry {s['entry_us'].get('first', 0):.2f}-{s['entry_us'].get('last', 0):.2f}, PDL wait done "
              f"{s['pdl_wait_done_us'].get('median', 0):.2f}, warp loop ends {s['warp_loop_end_us'].get('first', 0):.2f}"
              f" / {s['warp_loop_end_us'].get('median', 0):.2f} / {s['stream_end_us']:.2f}, last event "
              f"{s['kernel_last_event_us']:.2f} (end {s['end_after_stream_us']:.2f} us after the stream); merge ns "
              f"(median of {len(s['merges'])}): " + ", ".join(f"{k} {v:.0f}" for k, v in s.get("merge_ns_median", {}).items())
              + (f"; last merge events {['-' if x is None else round(x, 2) for x in lm.get('events_us', [])]}" if lm else ""),
              flush=True)
        sb = s.get("sm_balance")
        if sb:
            print(f"  SM loop ends {sb['sm_end_p10']:.1f} / {sb['sm_end_median']:.1f} / {sb['sm_end_last']:.1f} (10% / "
                  f"median / last); shared at the SMs' rates: {sb['balanced_end']:.1f} ({sb['gain_us']:.1f} us earlier)",
                  flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", default="131072x1,32768x1", help="LxB,...")
    ap.add_argument("--modes", default="b2b,no_pdl,chain", help="b2b, no_pdl, chain (comma-separated)")
    ap.add_argument("--src", default=None, help="kernel source to trace (default: this tree's int2_paged.cu)")
    ap.add_argument("--out", default="trace_decode.json")
    ap.add_argument("--poll-merge", action="store_true", help="CudaDecodeConfig.poll_merge=True (bench_decode's)")
    ap.add_argument("--merge-slices", type=int, default=None, help="CudaDecodeConfig.merge_slices (bench_decode's; "
                    "default: the plan's rule)")
    ap.add_argument("--variant", type=int, default=None, help="our kernel's variant (default: the plan's)")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in modes if m not in ("b2b", "no_pdl", "chain")]
    if bad:
        ap.error(f"unknown mode(s) {bad}: use b2b, no_pdl, chain")
    try:
        cuda_ops.check_merge_slices(a.merge_slices)
    except ValueError as e:
        ap.error(f"--merge-slices: {e}")
    if not torch.cuda.is_available():
        raise SystemExit("trace_decode.py needs a CUDA GPU (it reads the trace build's records of a real call)")
    print(f"trace build of {use_trace_build(a.src)}: {cuda_ops.build()}", flush=True)
    bd.POLL_MERGE = a.poll_merge
    bd.MERGE_SLICES = a.merge_slices
    dev = torch.device("cuda")
    rows = []
    for pt in a.points.split(","):
        L, B = (int(x) for x in pt.split("x"))
        rows.append(trace_point(B, L, dev, modes, a.variant))
        Path(a.out).write_text(json.dumps(dict(commit=source_commit(), device=torch.cuda.get_device_name(),
                                               src=str(a.src or "tree"), rows=rows), indent=1))


if __name__ == "__main__":
    main()
