"""Probes 20261207j background (exploratory, stored runs): per workload, the pipeline references' median over the
whole model timed at the job's start (the drift between the two), against the workload's trend by micro-batch
(20261207i part 2: largest minus smallest mbs log residual in a pipeline family, pooled in-turn medians, mean).

    PYTHONPATH=. python docs/probes/20261207j/drift_vs_trend.py > docs/probes/20261207j/drift_vs_trend.txt
"""
import collections, json, os, statistics as st, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import family, in_turn_residuals, stored_workloads
xs=[]
for wl in stored_workloads("/work/exp/s2*/d*/w*"):
    p=json.load(open(os.path.join(wl,"model.json")))
    pt=p.get('pipeline_timings',[])
    if not pt: continue
    mb=pt[0]['mbs']; w=pt[0]['world']
    whole=[g for g in p['whole_model_timings'] if g['mbs']==mb and g['world']==w]
    W=whole[0]['forward_s']+whole[0]['backward_s']
    ratio=st.median(t['reference_s'] for t in pt)/W
    d, rows = in_turn_residuals(wl)
    fams=collections.defaultdict(dict)
    for L,x,pr in rows:
        if L.pp>1: fams[family(L)][L.mbs]=x
    Ts=[v[max(v)]-v[min(v)] for v in fams.values() if len(v)>1]
    # also: mean pipeline residual at smallest mbs
    if Ts: xs.append((wl, w, ratio, st.mean(Ts), len(Ts)))
for r in xs: print("%-32s w=%d refratio %.3f T %+.3f (%d)"%(r[0][10:],*r[1:]))
import numpy as np
for w in (2,3,4,None):
    s=[r for r in xs if w is None or r[1]==w]
    a=np.array([r[2] for r in s]); b=np.array([r[3] for r in s])
    print(w, len(s), "corr %.2f"%np.corrcoef(np.log(a),b)[0,1], "slope %.2f"%np.polyfit(np.log(a),b,1)[0])
