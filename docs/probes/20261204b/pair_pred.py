import json, sys, statistics as st
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
wl = sys.argv[1]
d = json.load(open(f"{wl}/runs.json"))
meas = {}
for r in d["runs"]:
    meas[Layout.from_dict(r["layout"]).short()] = (r["layout"], r["measured"]["step_time_s"])
for r in d.get("confirmed", []):
    meas[Layout.from_dict(r["layout"]).short()] = (r["layout"], r["measured"]["step_time_s"])
for prof in sys.argv[2:]:
    pb = make_problem(f"{prof}/model.json", f"{wl}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
    errs = []; out = []
    for k, (lay, m) in meas.items():
        p = estimate_problem(pb, Layout.from_dict(lay)); p = p[1] if isinstance(p, tuple) else p
        errs.append(p.step_time_s / m - 1); out.append((p.step_time_s, k, m))
    best = min(out)
    fastest = min(out, key=lambda x: x[2])
    pj = json.load(open(f"{prof}/model.json"))
    pt = pj["pipeline_timings"]; w = pt[0]["world"]
    whole = [g for g in pj["whole_model_timings"] if g["mbs"] == 1][0]
    sc = (whole["forward_s"] + whole["backward_s"]) / st.median(t["reference_s"] for t in pt)
    pipe = [e for e, (_, k, _) in zip(errs, out) if "pp1 " not in k]
    dp = [e for e, (_, k, _) in zip(errs, out) if "pp1 " in k]
    print(f"{prof:28s} mean|err| {st.mean(abs(e) for e in errs):.1%}  pipelines {st.mean(pipe):+.1%}  dp {st.mean(dp):+.1%}  scale {sc:.3f}  picks {best[1][:40]} ({best[2]/fastest[2]-1:+.1%})")
