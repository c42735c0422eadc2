"""Each stored layout's log(measured / predicted), centred per workload, by how many micro-batches its
pipeline runs against its depth (m / pp), with every profile's pipeline costs refitted by the code on
PYTHONPATH. Measured: validate's once-measured step (all ten layouts of a workload).

    PYTHONPATH=<tree> python docs/probes/20261206/resid_m.py '/work/exp/s1*/d*/w*'
"""
import math, statistics as st, sys, os, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '20261205d'))
import autoplan.plan.pipeline_costs as pc
from autoplan.plan.api import estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
from retro import load_runs, problem, stored_workloads

groups = {}
for pattern in sys.argv[1:]:
    for wl in stored_workloads(pattern):
        d, once, _, _ = load_runs(wl)
        p = ModelProfile.load(f"{wl}/model.json")
        p.pipeline_costs = [c for c in (pc.fit_pipeline_costs(p, c.world, c.pp) for c in p.pipeline_costs) if c]
        tmp = os.path.join(tempfile.mkdtemp(), "model.json")
        p.save(tmp)
        pb = problem(wl, d, tmp)
        rows = []
        for k, r in once.items():
            L = Layout.from_dict(r["layout"])
            _, pr = estimate_problem(pb, L)
            rows.append((L, math.log(r["measured"]["step_time_s"] / pr.step_time_s)))
        mid = st.mean(x for _, x in rows)
        for L, x in rows:
            if L.pp == 1:
                g = "no pipeline"
            else:
                q = L.num_microbatches / L.pp
                g = ("interleaved " if L.vp > 1 else "1f1b/gpipe  ") + (
                    "m < pp" if q < 1 else "m = pp" if q == 1 else "m <= 2pp" if q <= 2 else "m > 2pp")
            groups.setdefault(g, []).append(x - mid)
print(f"{'layouts':24s} {'n':>4s} {'mean':>7s} {'sd':>6s}   (measured / predicted, centred per workload)")
for g in sorted(groups):
    xs = groups[g]
    print(f"{g:24s} {len(xs):4d} {math.expm1(st.mean(xs)):+7.1%} {st.pstdev(xs):6.1%}")
allx = [x for xs in groups.values() for x in xs]
print(f"{'all':24s} {len(allx):4d} {math.expm1(st.mean(allx)):+7.1%} {st.pstdev(allx):6.1%}")
