"""The level (mean log(measured / predicted) of once-measured layouts) of the stored fidelity workloads by world size
and layout family (3 layouts or more).

    PYTHONPATH=. python docs/probes/20261206h/level_by_family.py > docs/probes/20261206h/level_by_family.txt
"""
import collections
import os
import statistics as st
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import log_residuals, stored_workloads   # noqa: E402

agg = collections.defaultdict(list)
for wl in stored_workloads("/work/exp/s2*/d*/w*"):
    d, res = log_residuals(wl)
    for L, x, _ in res:
        fam = (f"dp{L.dp} tp{L.tp} pp{L.pp}" + (" z3" if L.zero == 3 else " z1/2" if L.zero else "")
               + (" rc" if L.recompute != "none" else ""))
        agg[(d["workload"]["world"], fam)].append(x)
for k in sorted(agg):
    v = agg[k]
    if len(v) >= 3:
        print(k, len(v), f"level {st.mean(v):+.3f} sd {st.pstdev(v):.3f}")
