"""Part 1 (PREREGISTRATION.md): the unpaired judge U against the paired judge P, between two in-turn jobs.

    PYTHONPATH=. python docs/probes/20261207k/part1.py      # every stored runs.json under /work/exp
"""
from __future__ import annotations

import glob
import json
import math
import statistics
import sys

from autoplan.validate import Measured, paired_excess


def medians(runs: list[dict]) -> list[float]:
    return [statistics.median(r["measured"]["in_turn_s"]) for r in runs]


def judges(runs: list[dict]) -> tuple[float, float]:
    """(U, P) for runs[0] (the model's choice) against the layout of the lowest median (P: what
    ``autoplan.validate.paired_excess`` computes, adopted after this part)."""
    med = medians(runs)
    f = min(range(len(runs)), key=med.__getitem__)
    u = med[0] / med[f] - 1.0
    if f == 0:
        return u, 0.0
    return u, paired_excess(Measured.from_dict(runs[0]["measured"]), Measured.from_dict(runs[f]["measured"]))


def round_correlation(runs: list[dict]) -> float | None:
    """Median over layout pairs of the correlation of their log steps over rounds."""
    logs = [[math.log(x) for x in r["measured"]["in_turn_s"]] for r in runs]
    cs = []
    for i in range(len(logs)):
        for j in range(i + 1, len(logs)):
            n = min(len(logs[i]), len(logs[j]))
            if n >= 3 and statistics.pstdev(logs[i][:n]) > 0 and statistics.pstdev(logs[j][:n]) > 0:
                cs.append(statistics.correlation(logs[i][:n], logs[j][:n]))
    return statistics.median(cs) if cs else None


def in_turn(runs: list[dict]) -> list[dict]:
    return [r for r in runs if r.get("measured") and r["measured"].get("in_turn_s")]


def main() -> None:
    paths = sorted(glob.glob(sys.argv[1] if len(sys.argv) > 1 else "/work/exp/**/runs.json", recursive=True))
    rows = []
    for p in paths:
        d = json.load(open(p))
        a, b = in_turn(d.get("confirmed") or []), in_turn(d.get("judged") or [])
        if len(a) < 2 or len(b) < 2:
            continue
        if a[0]["layout"] != d["runs"][0]["layout"] or b[0]["layout"] != a[0]["layout"]:
            continue            # the model's choice not timed in turn first
        u1, p1 = judges(a)
        u2, p2 = judges(b)
        rows.append((p, len(a), u1, p1, u2, p2, round_correlation(a), round_correlation(b)))
    print(f"{len(rows)} workloads with two in-turn jobs over the same layouts")
    print(f"{'workload':48s} {'n':>2s} {'U1':>7s} {'P1':>7s} {'U2':>7s} {'P2':>7s} {'corr1':>6s} {'corr2':>6s}")
    for p, n, u1, p1, u2, p2, c1, c2 in rows:
        name = p.replace("/work/exp/", "").replace("/runs.json", "")
        fc = lambda c: f"{c:+.2f}" if c is not None else "   -"
        print(f"{name:48s} {n:2d} {u1*100:+6.1f}% {p1*100:+6.1f}% {u2*100:+6.1f}% {p2*100:+6.1f}% {fc(c1):>6s} {fc(c2):>6s}")
    du = statistics.fmean(abs(r[2] - r[4]) for r in rows)
    dp = statistics.fmean(abs(r[3] - r[5]) for r in rows)
    au = sum((r[2] <= 0.05) == (r[4] <= 0.05) for r in rows)
    ap = sum((r[3] <= 0.05) == (r[5] <= 0.05) for r in rows)
    print(f"\nH1a: mean |U1 - U2| = {du*100:.2f} points, mean |P1 - P2| = {dp*100:.2f} points: "
          f"{'holds' if dp < du else 'fails'}")
    print(f"H1b: verdicts at 5% agree on {au} of {len(rows)} with U, {ap} with P: {'holds' if ap >= au else 'fails'}")
    print(f"within 5%: job 1 U {sum(r[2] <= 0.05 for r in rows)}, P {sum(r[3] <= 0.05 for r in rows)}; "
          f"job 2 U {sum(r[4] <= 0.05 for r in rows)}, P {sum(r[5] <= 0.05 for r in rows)} (of {len(rows)})")
    cs = [c for r in rows for c in r[6:] if c is not None]
    print(f"exploratory: correlation of two layouts' log steps over the rounds of one job, median over pairs, "
          f"median over jobs {statistics.median(cs):+.2f} (quartiles {statistics.quantiles(cs, n=4)[0]:+.2f}, "
          f"{statistics.quantiles(cs, n=4)[2]:+.2f}; {len(cs)} jobs)")


if __name__ == "__main__":
    main()
