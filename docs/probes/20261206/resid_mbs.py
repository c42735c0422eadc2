"""Each stored pipeline layout's log(measured / predicted), centred per workload (over all its layouts),
by micro-batch size, with every profile's pipeline costs refitted by the code on PYTHONPATH; the 55
workloads before this session apart from the 12 of seeds 20261245-46. Measured: validate's once-measured
step.   python docs/probes/20261206/resid_mbs.py"""
import math, statistics as st, sys, os
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '20261205d'))
from retro import centred_residuals, stored_workloads

groups = {}
for wl in stored_workloads('/work/exp/s1*/d*/w*'):
    part = "seeds 20261245-46" if ('/s17/' in wl or '/s18/' in wl) else "55 before"
    for L, x in centred_residuals(wl):
        if L.pp > 1:
            groups.setdefault((part, L.mbs), []).append(x)
print(f"{'workloads':18s} {'mbs':>3s} {'n':>4s} {'mean':>7s} {'sd':>6s}   (pipelines; measured / predicted, centred per workload)")
for (part, mbs) in sorted(groups):
    xs = groups[(part, mbs)]
    print(f"{part:18s} {mbs:3d} {len(xs):4d} {math.expm1(st.mean(xs)):+7.1%} {st.pstdev(xs):6.1%}")
