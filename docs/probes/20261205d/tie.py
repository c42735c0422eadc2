import json, sys, math, statistics as st
sys.path.insert(0, __import__('os').path.dirname(__file__))
from autoplan.plan.api import estimate_problem
from autoplan.plan.plan import Layout
from retro import load_runs, problem, stored_workloads
data=[]
for wl in stored_workloads():
    d, once, j1, j2 = load_runs(wl)
    pool={k:math.sqrt(j1[k]*j2[k]) for k in j1 if k in j2}
    pb = problem(wl, d)
    c=[]
    for k,r in once.items():
        L=Layout.from_dict(r["layout"]); _, pr = estimate_problem(pb, L)
        c.append((pr.step_time_s, L, pool.get(k, float('nan')), r['measured']['step_time_s']))
    data.append((wl,c))
json.dump([(wl,[(a,L.to_dict(),p,o) for a,L,p,o in c]) for wl,c in data], open('/tmp/cands.json','w'))
keys={'none':lambda L:0,'fewest_m':lambda L:L.num_microbatches*L.vp,'big_mbs':lambda L:-L.mbs,'low_vp':lambda L:L.vp,'fewest_actions':lambda L:L.num_microbatches*L.vp*L.pp, 'dp_first': lambda L:(L.pp,)}
for eps in (0.01,0.02,0.03,0.05):
  for name,f in keys.items():
    ok=0; misses=[]
    for wl,c in data:
        best=min(x[0] for x in c)
        near=[x for x in c if x[0]<=best*(1+eps)]
        ch=min(near,key=lambda x:(f(x[1]),x[0]))
        fp=min(x[2] for x in c if x[2]==x[2])
        miss=ch[2]/fp-1 if ch[2]==ch[2] else float('nan')
        ok+= miss<=0.05; misses.append(miss)
    print(f"eps {eps:.2f} {name:15s} within5 {ok}/{len(data)} mean miss {st.mean(m for m in misses if m==m):+.2%}")
