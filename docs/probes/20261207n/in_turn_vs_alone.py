"""Each layout's in-turn median (validate --confirm's job, and fidelity.py's second job) over its single launch
(validate's first measurement), by world size and family, over every stored fidelity runs.json.

    python docs/probes/20261207n/in_turn_vs_alone.py [GLOB ...]

Default globs: the runs stored under docs/probes and /work/exp (this VM's session data).  Family: pp (pp > 1),
tp (tp > 1, pp 1), dp (pp 1, tp 1; any ZeRO stage)."""
from __future__ import annotations

import glob
import json
import statistics as st
import sys
from collections import defaultdict


def rows(paths):
    for f in paths:
        try:
            d = json.load(open(f))
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict) or "runs" not in d:
            continue
        alone = {json.dumps(r["layout"], sort_keys=True): r["measured"]["step_time_s"]
                 for r in d["runs"] if r.get("measured")}
        for job in ("confirmed", "judged"):
            for r in d.get(job) or []:
                m, L = r.get("measured"), r["layout"]
                if not m or not m.get("in_turn_s"):
                    continue
                k = json.dumps(L, sort_keys=True)
                world = L["dp"] * L["tp"] * L["pp"] * L.get("cp", 1)
                fam = "pp" if L["pp"] > 1 else "tp" if L["tp"] > 1 else "dp"
                yield f, job, world, fam, st.median(m["in_turn_s"]) / alone[k] - 1.0


def main(argv):
    pats = argv or ["docs/probes/**/*runs*.json", "/work/exp/**/runs.json"]
    paths = sorted({p for pat in pats for p in glob.glob(pat, recursive=True)})
    g = defaultdict(list)
    for f, job, world, fam, x in rows(paths):
        g[(world, fam)].append((x, f))
    print(f"{len(paths)} files; in-turn median / single launch - 1, per (world, family)")
    for (world, fam), v in sorted(g.items()):
        xs = [x for x, _ in v]
        q = st.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
        print(f"  world {world} {fam}: n {len(xs):3d}  median {100 * st.median(xs):+5.1f}%  "
              f"quartiles {100 * q[0]:+5.1f}% {100 * q[2]:+5.1f}%  min {100 * min(xs):+5.1f}%  max {100 * max(xs):+5.1f}%"
              f"  ({len({f for _, f in v})} workloads)")


if __name__ == "__main__":
    main(sys.argv[1:])
