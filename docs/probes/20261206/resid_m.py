"""Each stored layout's log(measured / predicted), centred per workload, by how many micro-batches its
pipeline runs against its depth (m / pp), with every profile's pipeline costs refitted by the code on
PYTHONPATH. Measured: validate's once-measured step (all ten layouts of a workload).

    PYTHONPATH=<tree> python docs/probes/20261206/resid_m.py '/work/exp/s1*/d*/w*'
"""
import math, statistics as st, sys, os
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '20261205d'))
from retro import centred_residuals, stored_workloads

groups = {}
for pattern in sys.argv[1:]:
    for wl in stored_workloads(pattern):
        for L, x in centred_residuals(wl):
            if L.pp == 1:
                g = "no pipeline"
            else:
                q = L.num_microbatches / L.pp
                g = ("interleaved " if L.vp > 1 else "1f1b/gpipe  ") + (
                    "m < pp" if q < 1 else "m = pp" if q == 1 else "m <= 2pp" if q <= 2 else "m > 2pp")
            groups.setdefault(g, []).append(x)
print(f"{'layouts':24s} {'n':>4s} {'mean':>7s} {'sd':>6s}   (measured / predicted, centred per workload)")
for g in sorted(groups):
    xs = groups[g]
    print(f"{g:24s} {len(xs):4d} {math.expm1(st.mean(xs)):+7.1%} {st.pstdev(xs):6.1%}")
allx = [x for xs in groups.values() for x in xs]
print(f"{'all':24s} {len(allx):4d} {math.expm1(st.mean(allx)):+7.1%} {st.pstdev(allx):6.1%}")
