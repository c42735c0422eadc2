import sys, glob, os, math, statistics as st
sys.path.insert(0,'docs/probes/20261205d')
from retro import load_runs
from autoplan.plan.plan import Layout
wls = sorted(w for w in glob.glob('/work/exp/s2*/*/w*') if os.path.exists(w+'/runs.json'))
rows=[]
for wl in wls:
    d,once,j1,j2=load_runs(wl)
    if not j1: continue
    r=[math.log(j1[k]/once[k]["measured"]["step_time_s"]) for k in j1]
    pp=[Layout.from_dict(once[k]["layout"]).pp>1 for k in j1]
    W=d["workload"]["world"]
    rows.append((wl,W,len(j1),math.exp(st.mean(r))-1, sum(pp)/len(pp)))
for x in rows: print(f"{x[0][-22:]:22s} W{x[1]} n{x[2]:2d} j1/once {x[3]:+.1%} pp-share {x[4]:.1f}")
import collections
by=collections.defaultdict(list)
for x in rows: by[(x[1], x[2]>=8)].append(x[3])
for k in sorted(by): print(k, len(by[k]), f"{st.mean(by[k]):+.1%}")
