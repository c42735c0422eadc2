"""Per stored fidelity workload: the first in-turn job's medians over the once-measured launches of the same layouts
(geometric mean), and the pipelines' share of its layouts; then the mean by world size.

    PYTHONPATH=. python docs/probes/20261206h/j1_over_once.py > docs/probes/20261206h/j1_over_once.txt
"""
import collections
import math
import os
import statistics as st
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import load_runs, stored_workloads   # noqa: E402

from autoplan.plan.plan import Layout   # noqa: E402

by = collections.defaultdict(list)
for wl in stored_workloads("/work/exp/s2*/*/w*"):
    d, once, j1, _ = load_runs(wl)
    if not j1:
        continue
    ratio = math.exp(st.mean(math.log(j1[k] / once[k]["measured"]["step_time_s"]) for k in j1)) - 1
    pp_share = st.mean(Layout.from_dict(once[k]["layout"]).pp > 1 for k in j1)
    W = d["workload"]["world"]
    by[W].append(ratio)
    print(f"{wl[-22:]:22s} W{W} n{len(j1):2d} j1/once {ratio:+.1%} pp-share {pp_share:.1f}")
for W in sorted(by):
    print(f"W{W}", len(by[W]), f"{st.mean(by[W]):+.1%}")
