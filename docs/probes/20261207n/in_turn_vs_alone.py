"""Each layout's in-turn median (validate --confirm's job, and fidelity.py's second job) over its single launch
(validate's first measurement), by world size and family, over every stored fidelity runs.json.

    PYTHONPATH=. python docs/probes/20261207n/in_turn_vs_alone.py [GLOB ...]

Default globs: ``stored.DEFAULT_GLOBS`` (each workload once).  Family: ``stored.family``."""
from __future__ import annotations

import statistics as st
import sys
from collections import defaultdict

from stored import DEFAULT_GLOBS, family, in_turn, stored_workloads


def main(argv):
    workloads = stored_workloads(argv or DEFAULT_GLOBS)
    g = defaultdict(list)
    for w in workloads:
        alone = {r.layout.short(): r.measured.step_time_s for r in w.runs if r.measured}
        for r in in_turn(w.confirmed) + in_turn(w.judged):
            g[(r.layout.world_size, family(r.layout))].append(
                (st.median(r.measured.in_turn_s) / alone[r.layout.short()] - 1.0, w.path))
    print(f"{len(workloads)} workloads; in-turn median / single launch - 1, per (world, family)")
    for (world, fam), v in sorted(g.items()):
        xs = [x for x, _ in v]
        q = st.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
        print(f"  world {world} {fam}: n {len(xs):3d}  median {100 * st.median(xs):+5.1f}%  "
              f"quartiles {100 * q[0]:+5.1f}% {100 * q[2]:+5.1f}%  min {100 * min(xs):+5.1f}%  max {100 * max(xs):+5.1f}%"
              f"  ({len({f for _, f in v})} workloads)")


if __name__ == "__main__":
    main(sys.argv[1:])
