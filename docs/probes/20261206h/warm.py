"""Does a launch warm up within validate's 2 untimed steps? Each timed step over its launch's median (mean log), by
position, over every stored launch; the same for the in-turn jobs' steps.

    PYTHONPATH=. python docs/probes/20261206h/warm.py > docs/probes/20261206h/warm.txt
"""
import sys, json, math, statistics as st, collections
sys.path.insert(0,'docs/probes/20261205d')
from retro import stored_workloads
pos=collections.defaultdict(list); pos_it=collections.defaultdict(list); pos_j2=collections.defaultdict(list)
byW=collections.defaultdict(lambda: collections.defaultdict(list))
for wl in stored_workloads('/work/exp/s2*/*/w*'):
    d=json.load(open(wl+'/runs.json')); W=d["workload"]["world"]
    for r in d["runs"]:
        m=r["measured"]
        if not m: continue
        ts=m["step_times_s"]; med=st.median(ts)
        for i,t in enumerate(ts): pos[i].append(math.log(t/med)); byW[W][i].append(math.log(t/med))
    for tab,dst in (("confirmed",pos_it),("judged",pos_j2)):
        for r in d.get(tab,[]):
            m=r["measured"]
            if not m or not m.get("in_turn_s"): continue
            ts=m["in_turn_s"]; med=st.median(ts)
            for i,t in enumerate(ts): dst[i].append(math.log(t/med))
print("once: step i over the run's median", {i:f"{st.mean(v):+.3f}" for i,v in pos.items()}, len(pos[0]))
for W in sorted(byW): print("  W",W,{i:f"{st.mean(v):+.3f}" for i,v in byW[W].items()})
print("in-turn job 1", {i:f"{st.mean(v):+.3f}" for i,v in pos_it.items()})
print("in-turn job 2", {i:f"{st.mean(v):+.3f}" for i,v in pos_j2.items()})
