"""Predict a stored fidelity workload's layouts with an older autoplan on PYTHONPATH (9ff4cd4 here): its profile
loaded after dropping the keys the older reader refuses, its pipeline runs fitted again by the older
``fit_pipeline_costs``; prints old and current predictions beside the once-measured and in-turn times.

    PYTHONPATH=/path/to/worktree-at-9ff4cd4 python docs/probes/20261206g/old_predict.py /work/exp/s23/shape192x6/w0
"""
import json, sys, re, tempfile, os, statistics as st
from autoplan.errors import InputError
from autoplan.profile.formats import ModelProfile
import autoplan.plan.pipeline_costs as pc
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
wl = sys.argv[1]
prof = json.load(open(f"{wl}/model.json"))
dropped = []
def drop(obj, path):
    # path like pipeline_costs[0] or a.b[2].c
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    o = obj
    for p in parts:
        o = o[int(p[1:-1])] if p.startswith("[") else o[p]
    return o
tmp = os.path.join(tempfile.mkdtemp(), "model.json")
for _ in range(50):
    json.dump(prof, open(tmp, "w"))
    try:
        p = ModelProfile.load(tmp); break
    except InputError as e:
        m = re.search(r"malformed model profile: (.*?): unknown keys '(.*?)'", str(e))
        if not m: raise
        where, keys = m.group(1), m.group(2).split(", ")
        o = drop(prof, where) if where else prof
        targets = o if isinstance(o, list) else [o]
        # drop the key from every sibling in a list too
        parent_path = re.sub(r"\[\d+\]$", "", where)
        sib = drop(prof, parent_path) if parent_path != where else None
        for t in (sib if isinstance(sib, list) else targets):
            for k in keys: t.pop(k, None)
        dropped.append((where, keys))
print("dropped", dropped)
refit = [c for c in (pc.fit_pipeline_costs(p, c.world, c.pp) for c in p.pipeline_costs) if c]
print("refit", len(refit), "of", len(p.pipeline_costs))
p.pipeline_costs = refit
p.save(tmp)
d = json.load(open(f"{wl}/runs.json"))
pb = make_problem(tmp, f"{wl}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
eo, ec = [], []
conf = {json.dumps(r["layout"], sort_keys=True): r["measured"]["step_time_s"] for r in d.get("confirmed", [])}
for r in d["runs"]:
    L = Layout.from_dict(r["layout"]); _, pr = estimate_problem(pb, L)
    m = r["measured"]["step_time_s"]; mc = conf.get(json.dumps(r["layout"], sort_keys=True), m)
    eo.append(abs(pr.step_time_s / m - 1)); ec.append(abs(pr.step_time_s / mc - 1))
    print(f"{L.short():58s} old {pr.step_time_s:.3f} now {r['predicted']['step_time_s']:.3f} once {m:.3f} in-turn {mc:.3f}")
print(f"9ff4cd4 code: error over once {st.mean(eo):.1%}, over the in-turn table {st.mean(ec):.1%}")
