"""Where the INT2 decode loop's warps stall, per SASS instruction (issue 7).

    python bench/ncu_stalls.py bench/results/2026-12-03_s8a_ncu_source_131072_32_0.csv.gz [--top 50]

Reads Nsight Compute's source page exported as CSV (``ncu --section WarpStateStats --section SourceCounters
--page source --print-source sass --csv``; plain or gzipped) for one kernel launch. The hot loop is the set of
instructions executed at least half as often as the most executed one. Prints the loop's share of all stall
samples, its stall reasons, the opcodes' counts and sample shares, and the most sampled instructions in
address order with their two main reasons. Then the end of the call (the executed instructions after the loop's last
one, less the subroutines that CALLs reach, which are placed there but run from anywhere, and are listed apart): its
share of the samples and its stall reasons, for the code every warp runs (the epilogue, the CTA combine, the arrival)
and for the code few warps run (executed < 1/4 as often: mostly the last CTAs' merge, also the BF16-tier CTAs' own
code), e.g. how much of the end is instruction fetch (``no_inst``) against barrier waits and dependencies
(fifty-fourth session).
"""
from __future__ import annotations

import argparse
import collections
import csv
import gzip


def num(x: str) -> float:
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=50)
    a = ap.parse_args()
    opener = gzip.open if a.csv.endswith(".gz") else open
    with opener(a.csv, "rt") as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    head = next(r for r in rows if r and r[0] == "Address")
    body = rows[rows.index(head) + 1:]
    ix = {h: i for i, h in enumerate(head)}
    samples = ix["Warp Stall Sampling (All Samples)"]
    reasons = [h for h in head if h.startswith("stall_") and "Not Issued" not in h]
    executed = [num(r[ix["Instructions Executed"]]) for r in body]
    top = max(executed)
    hot = [r for r, e in zip(body, executed) if e >= 0.5 * top]
    total, hot_s = sum(num(r[samples]) for r in body), sum(num(r[samples]) for r in hot)
    print(f"{len(body)} instructions, hot loop {len(hot)} (executed >= half of {top:.0f}): "
          f"{100 * hot_s / total:.1f}% of {total:.0f} stall samples")
    by_reason = collections.Counter({c: sum(num(r[ix[c]]) for r in hot) for c in reasons})
    for c, v in by_reason.most_common(10):
        print(f"  {c[6:]:20s} {100 * v / hot_s:5.1f}%")
    count, share = collections.Counter(), collections.Counter()
    for r in hot:
        words = r[1].split()
        op = (words[1] if words[0].startswith("@") else words[0]).split(".")[0]
        count[op] += 1
        share[op] += num(r[samples])
    print("opcodes in the loop: count, share of its samples")
    print("  " + ", ".join(f"{op} {n} ({100 * share[op] / hot_s:.1f}%)" for op, n in count.most_common()))
    chosen = {id(r) for r in sorted(hot, key=lambda r: -num(r[samples]))[:a.top]}
    print(f"the {a.top} most sampled loop instructions, in address order:")
    for r in hot:
        if id(r) in chosen:
            why = sorted(((num(r[ix[c]]), c[6:]) for c in reasons), reverse=True)[:2]
            print(f"  {r[0][-5:]} {100 * num(r[samples]) / hot_s:4.1f}%  {why[0][1]} {why[0][0]:.0f}, "
                  f"{why[1][1]} {why[1][0]:.0f}  {r[1].strip()[:80]}")
    last = max(i for i, e in enumerate(executed) if e >= 0.5 * top)
    # subroutines: from each executed CALL's target to the next RET
    at = {r[0].lower(): i for i, r in enumerate(body)}
    sub = set()
    for r, e in zip(body, executed):
        if e > 0 and "CALL" in r[1] and r[1].split()[-1].lower() in at:
            i = at[r[1].split()[-1].lower()]
            j = next((k for k in range(i, len(body)) if "RET" in body[k][1]), len(body) - 1)
            s = sum(num(body[k][samples]) for k in range(i, j + 1))
            print(f"subroutine at {body[i][0][-5:]} (CALL at {r[0][-5:]}, executed {e:.0f} times): {j - i + 1} "
                  f"instructions, {100 * s / total:.1f}% of the samples")
            sub.update(range(i, j + 1))
    end = [(r, e) for k, (r, e) in enumerate(zip(body, executed)) if k > last and e > 0 and k not in sub]
    if not end:
        return
    wide = max(e for _, e in end)
    for name, part in (("every warp's", [r for r, e in end if e >= 0.25 * wide]),
                       ("few warps' (merge)", [r for r, e in end if e < 0.25 * wide])):
        s = sum(num(r[samples]) for r in part)
        if not s:
            continue
        why = collections.Counter({c: sum(num(r[ix[c]]) for r in part) for c in reasons})
        print(f"end of the call, {name} code: {len(part)} instructions, {100 * s / total:.1f}% of the samples; "
              + ", ".join(f"{c[6:]} {100 * v / s:.0f}%" for c, v in why.most_common(6)))


if __name__ == "__main__":
    main()
