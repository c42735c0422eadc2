import sys, glob, math, statistics as st, collections, os
sys.path.insert(0,'docs/probes/20261205d')
from retro import load_runs, refitted_problem
from autoplan.plan.api import estimate_problem
from autoplan.plan.plan import Layout
wls = sorted(w for w in glob.glob('/work/exp/s2*/d*/w*') if os.path.exists(w+'/runs.json'))
agg=collections.defaultdict(list)
for wl in wls:
    d, once, j1, j2 = load_runs(wl)
    pb = refitted_problem(wl, d)
    W = pb.cluster.world_size
    for k,r in once.items():
        L=Layout.from_dict(r["layout"]); pr=estimate_problem(pb,L)[1]
        x=math.log(r["measured"]["step_time_s"]/pr.step_time_s)
        fam=f"dp{L.dp} tp{L.tp} pp{L.pp}"+(" z3" if L.zero==3 else " z1/2" if L.zero else "")+(" rc" if L.recompute!="none" else "")
        agg[(W,fam)].append(x)
for k in sorted(agg):
    v=agg[k]
    if len(v)>=3: print(k, len(v), f"level {st.mean(v):+.3f} sd {st.pstdev(v):.3f}")
