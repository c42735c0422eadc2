import sys, glob, math, statistics as st, os
sys.path.insert(0,'docs/probes/20261205d')
from retro import load_runs, refitted_problem
from autoplan.plan.api import estimate_problem
from autoplan.plan.plan import Layout
wls = sorted(w for w in glob.glob('/work/exp/s2*/*/w*') if os.path.exists(w+'/runs.json'))
rows=[]
for wl in wls:
    d, once, j1, j2 = load_runs(wl)
    pb = refitted_problem(wl, d)
    W = pb.cluster.world_size
    res=[]; steps=[]; comp=[]
    for k,r in once.items():
        L=Layout.from_dict(r["layout"]); pr=estimate_problem(pb,L)[1]
        res.append(math.log(r["measured"]["step_time_s"]/pr.step_time_s)); steps.append(r["measured"]["step_time_s"])
    sh=d["workload"]["shape"]
    rows.append((wl, W, st.mean(res), min(steps), sh.get("hidden") or sh.get("d_model"), sh.get("num_layers") or sh.get("layers"), d["workload"]["global_batch"], sh.get("seq_len")))
for r in rows: print(f"{r[0][-20:]:20s} W{r[1]} level {r[2]:+.3f} fastest {r[3]:.3f}s  h{r[4]} L{r[5]} gb{r[6]} seq{r[7]}")
import numpy as np
for W in (2,3,4):
    x=[math.log(r[3]) for r in rows if r[1]==W]; y=[r[2] for r in rows if r[1]==W]
    if len(x)>2: print(W, len(x), "corr(level, log fastest) %.2f"%np.corrcoef(x,y)[0,1], "mean level %+.3f"%st.mean(y))
