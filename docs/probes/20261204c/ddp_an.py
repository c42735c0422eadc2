"""Paired: one profile re-predicting a workload's measured layouts with the whole model's DDP figures
(backward_sync_s) and with them zeroed (the cluster's all-reduce fit, as before)."""
import json, sys, copy, statistics as st
from dataclasses import replace
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
prof, wl = sys.argv[1], sys.argv[2]
P = ModelProfile.load(prof)
d = json.load(open(f"{wl}/runs.json")); meas = {}
for r in d["runs"] + d.get("confirmed", []):
    meas.setdefault(Layout.from_dict(r["layout"]).short(), (r["layout"], []))[1].append(r["measured"]["step_time_s"])
for name in ("measured DDP", "fit"):
    q = copy.deepcopy(P)
    if name == "fit":
        q.whole_model_timings = [replace(g, backward_sync_s=0.0) for g in q.whole_model_timings]
    q.save("/tmp/ddp_an.json")
    pb = make_problem("/tmp/ddp_an.json", f"{wl}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
    out = sorted(((estimate_problem(pb, Layout.from_dict(l))[1], st.median(v), k) for k, (l, v) in meas.items()), key=lambda x: x[0].step_time_s)
    errs = [p.step_time_s / m - 1 for p, m, _ in out]
    print(f"== {name}: mean|err| {st.mean(map(abs, errs)):.1%}, pick {out[0][1] / min(x[1] for x in out) - 1:+.1%}")
    for p, m, k in out:
        print(f"  {k[:56]:56s} pred {p.step_time_s:.4f} meas {m:.4f} {p.step_time_s/m-1:+.1%}  dp_sync {p.breakdown_s.get('dp_sync', 0)*1e3:.1f}")
