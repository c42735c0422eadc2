"""Each single launch's signed step-time error minus its workload's median error, by world size and family: is a
family off, or do layouts scatter about their workload's level?  (The closing note's "Next".)

    PYTHONPATH=. python docs/probes/20261207n/family_error.py [GLOB ...]"""
import statistics as st
import sys
from collections import defaultdict

from stored import DEFAULT_GLOBS, family, stored_workloads

g = defaultdict(list)
for w in stored_workloads(sys.argv[1:] or DEFAULT_GLOBS):
    ok = [r for r in w.runs if r.measured]
    if not ok:
        continue
    errs = [r.predicted.step_time_s / r.measured.step_time_s - 1 for r in ok]
    level = st.median(errs)
    for r, e in zip(ok, errs):
        g[(r.layout.world_size, family(r.layout))].append(e - level)
for (world, fam), v in sorted(g.items()):
    print(f"world {world} {fam}: {len(v):3d} layouts, signed error minus the workload's median: median {100 * st.median(v):+.1f}%")
