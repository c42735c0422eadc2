"""Part 3's figures: plan A's step over plan B's in each mode of settle_probe.py's output (paired median over
rounds for the in-turn modes, the ratio of medians for ``blocks``), and how unbalanced the ranks' CPU time was.

    python docs/probes/20261207n/settle_summary.py settle1.json [settle2.json ...] [--a 0 --b 2]
"""
from __future__ import annotations

import argparse
import json
import statistics as st


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--a", type=int, default=0)
    p.add_argument("--b", type=int, default=2)
    a = p.parse_args()
    for f in a.files:
        d = json.load(open(f))
        print(f"{f}: plan {a.a} over plan {a.b}")
        for mode in ("turn", "settle", "blocks", "turn2"):
            A = [s["step_s"] for s in d[mode][a.a]]
            B = [s["step_s"] for s in d[mode][a.b]]
            paired = st.median(x / y for x, y in zip(A, B))
            ratio = st.median(A) / st.median(B)
            # the ranks' CPU seconds in a step: the largest over the smallest, median over the plan's steps
            imb = [st.median(max(s["cpu_s"]) / max(1e-9, min(s["cpu_s"])) for s in d[mode][k]) for k in (a.a, a.b)]
            print(f"  {mode:6s}  A {st.median(A):.3f} s  B {st.median(B):.3f} s  paired {paired:.3f}  "
                  f"ratio of medians {ratio:.3f}  rank CPU max/min A {imb[0]:.2f} B {imb[1]:.2f}")


if __name__ == "__main__":
    main()
