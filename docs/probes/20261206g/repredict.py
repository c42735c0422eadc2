"""Re-predict a stored fidelity workload's measured layouts with the code on PYTHONPATH (profiles as stored).

    PYTHONPATH=. python docs/probes/20261206g/repredict.py /work/exp/s23/shape192x6/w0
"""
import json, sys, statistics as st
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
wl = sys.argv[1]
d = json.load(open(f"{wl}/runs.json"))
pb = make_problem(f"{wl}/model.json", f"{wl}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
errs = []
for r in d["runs"]:
    L = Layout.from_dict(r["layout"])
    _, pr = estimate_problem(pb, L)
    m = r["measured"]["step_time_s"]
    errs.append(abs(pr.step_time_s - m) / m)
    print(f"{L.short():60s} pred {pr.step_time_s:.3f} (stored {r['predicted']['step_time_s']:.3f}) meas {m:.3f} err {(pr.step_time_s-m)/m:+.1%}")
print(f"mean abs error {st.mean(errs):.1%}")
