import json, sys, math, statistics as st
sys.path.insert(0, __import__('os').path.dirname(__file__))
from autoplan.plan.api import estimate_problem
from autoplan.plan.plan import Layout
from retro import load_runs, problem, stored_workloads
rows=[]
for wi,wl in enumerate(stored_workloads()):
    d, once, j1, j2 = load_runs(wl)
    pb = problem(wl, d)
    W=d['workload']['world']
    wr=[]
    for k,r in once.items():
        if not (k in j1 and k in j2): continue
        L=Layout.from_dict(r["layout"])
        _, pr = estimate_problem(pb, L)
        meas=math.sqrt(j1[k]*j2[k])
        wr.append(dict(wl=wi,W=W,pp=L.pp,vp=L.vp,m=L.num_microbatches,mbs=L.mbs,dp=L.dp,sched=L.schedule if L.pp>1 else 'none',zero=L.zero,res=math.log(meas/pr.step_time_s),k=k))
    if len(wr)<3: continue
    mu=st.mean(x['res'] for x in wr)
    for x in wr: x['rres']=x['res']-mu
    rows+=wr
print(len(rows))
import collections
def group(f):
    g=collections.defaultdict(list)
    for x in rows: g[f(x)].append(x['rres'])
    for k,v in sorted(g.items(), key=lambda kv: str(kv[0])): print(f"  {str(k):30s} n={len(v):3d} mean {st.mean(v):+.3f} sd {st.pstdev(v):.3f}")
print('by W,family'); group(lambda x:(x['W'], 'dp' if x['pp']==1 else f"pp{x['pp']}" + ('int' if x['vp']>1 else x['sched'])))
print('by mbs,W'); group(lambda x:(x['W'], x['mbs']))
print('by m (pipelines)'); group(lambda x:(x['W'], x['m'] if x['pp']>1 else -1))
print('by vp'); group(lambda x:(x['W'], x['vp'] if x['pp']>1 else -1))
print('by zero'); group(lambda x:(x['W'], x['zero'] if x['pp']==1 else -1))
json.dump(rows, open('/tmp/rows.json','w'))
