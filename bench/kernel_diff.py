"""The kernels one decode step runs that another does not (bench/profile_step.py's JSON, "all" lists):

    python3 bench/kernel_diff.py profile.json [--where graph]

Per kernel name: count per step and us per step of each (method, compiled) entry of the profile, listing the
names whose count differs between the first two entries (e.g. OSCAR vs BF16, compiled)."""

import argparse
import json
import re


def norm(name: str) -> str:
    """A kernel's name without inductor's numeric suffix (triton_poi_fused_add_3 -> triton_poi_fused_add)."""
    return re.sub(r"_\d+$", "", name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--where", default="graph", choices=("graph", "outside_graph"))
    a = ap.parse_args()
    runs = [r for r in json.load(open(a.profile))["runs"] if a.where in r][:2]
    if len(runs) < 2:
        raise SystemExit(f"kernel_diff.py: {a.profile} has fewer than two runs with a {a.where!r} profile")
    tabs = []
    for r in runs:
        t: dict = {}
        for k in r[a.where]["all"]:
            c = t.setdefault(norm(k["name"]), [0.0, 0.0])
            c[0] += k["count_per_step"]
            c[1] += k["us_per_step"]
        tabs.append(t)
    label = [f"{r['method']}{' compiled' if r['compiled'] else ''}" for r in runs]
    print(f"{'kernel':90s} | {label[0]:>22s} | {label[1]:>22s}")
    for name in sorted(set(tabs[0]) | set(tabs[1])):
        c0, u0 = tabs[0].get(name, (0, 0))
        c1, u1 = tabs[1].get(name, (0, 0))
        if abs(c0 - c1) > 0.01:
            print(f"{name[:90]:90s} | {c0:6.1f}x {u0:10.1f} us | {c1:6.1f}x {u1:10.1f} us")


if __name__ == "__main__":
    main()
