"""Re-predict a stored fidelity workload's once-measured layouts with the code on PYTHONPATH (its profiles as stored,
``../20261205d/retro.py``'s problem).

    PYTHONPATH=. python docs/probes/20261206g/repredict.py /work/exp/s23/shape192x6/w0
"""
import os
import statistics as st
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import load_runs, problem   # noqa: E402

from autoplan.plan.api import estimate_problem   # noqa: E402
from autoplan.plan.plan import Layout   # noqa: E402

wl = sys.argv[1]
d, once, _, _ = load_runs(wl)
pb = problem(wl, d)
errs = []
for r in once.values():
    L = Layout.from_dict(r["layout"])
    pred, meas = estimate_problem(pb, L)[1].step_time_s, r["measured"]["step_time_s"]
    errs.append(abs(pred - meas) / meas)
    print(f"{L.short():60s} pred {pred:.3f} (stored {r['predicted']['step_time_s']:.3f}) meas {meas:.3f} "
          f"err {(pred - meas) / meas:+.1%}")
print(f"mean abs error {st.mean(errs):.1%}")
