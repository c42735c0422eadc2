"""Between the two in-turn jobs of each stored workload: the job-wide factor and each layout's own move (sd), against the bootstrap sd of one 12-step in-turn median."""
import json, glob, math, statistics as st, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import load_runs
sds=[]; allx=[]
for wl in sorted(w for a in sys.argv[1:] for w in glob.glob(a)):
    if not os.path.exists(wl+"/runs.json"): continue
    d, once, j1, j2 = load_runs(wl)
    both=[k for k in j1 if k in j2]
    if len(both)<3: continue
    x=[math.log(j2[k]/j1[k]) for k in both]
    mu=st.mean(x); r=[v-mu for v in x]
    sds.append(st.pstdev(r)*math.sqrt(len(r)/(len(r)-1))); allx+=r
    print(wl[-16:], len(both), "job factor %+.3f  case sd %.3f"%(mu, sds[-1]))
print("median case sd between jobs: %.3f; pooled sd %.3f"%(st.median(sds), st.pstdev(allx)))
# within-job sampling noise of the in-turn median: bootstrap over the 12 in-turn steps
import random
rng=random.Random(0); boots=[]
for wl in sorted(w for a in sys.argv[1:] for w in glob.glob(a)):
    if not os.path.exists(wl+"/runs.json"): continue
    d=json.load(open(wl+"/runs.json"))
    for sect in ("confirmed","judged"):
        for c in d.get(sect,[]):
            xs=c["measured"].get("in_turn_s")
            if not xs or len(xs)<6: continue
            m=st.median(xs)
            b=[math.log(st.median([rng.choice(xs) for _ in xs])/m) for _ in range(200)]
            boots.append(st.pstdev(b))
print("bootstrap sd of one in-turn median (within job): median %.3f over %d"%(st.median(boots),len(boots)))
print("=> between-job case sd expected from sampling alone: %.3f"%(math.sqrt(2)*st.median(boots)))
