"""Each stored pipeline layout's log(measured / predicted), centred per workload (over all its layouts),
by micro-batch size, with every profile's pipeline costs refitted by the code on PYTHONPATH; the 55
workloads before this session apart from the 12 of seeds 20261245-46. Measured: validate's once-measured
step.   python docs/probes/20261206/resid_mbs.py"""
import math, statistics as st, sys, os, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '20261205d'))
import autoplan.plan.pipeline_costs as pc
from autoplan.plan.api import estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
from retro import load_runs, problem, stored_workloads

groups = {}
for wl in stored_workloads('/work/exp/s1*/d*/w*'):
    part = "seeds 20261245-46" if ('/s17/' in wl or '/s18/' in wl) else "55 before"
    d, once, _, _ = load_runs(wl)
    p = ModelProfile.load(f"{wl}/model.json")
    p.pipeline_costs = [c for c in (pc.fit_pipeline_costs(p, c.world, c.pp) for c in p.pipeline_costs) if c]
    tmp = os.path.join(tempfile.mkdtemp(), "model.json")
    p.save(tmp)
    pb = problem(wl, d, tmp)
    rows = []
    for r in once.values():
        L = Layout.from_dict(r["layout"])
        _, pr = estimate_problem(pb, L)
        rows.append((L, math.log(r["measured"]["step_time_s"] / pr.step_time_s)))
    mid = st.mean(x for _, x in rows)
    for L, x in rows:
        if L.pp > 1:
            groups.setdefault((part, L.mbs), []).append(x - mid)
print(f"{'workloads':18s} {'mbs':>3s} {'n':>4s} {'mean':>7s} {'sd':>6s}   (pipelines; measured / predicted, centred per workload)")
for (part, mbs) in sorted(groups):
    xs = groups[(part, mbs)]
    print(f"{part:18s} {mbs:3d} {len(xs):4d} {math.expm1(st.mean(xs)):+7.1%} {st.pstdev(xs):6.1%}")
