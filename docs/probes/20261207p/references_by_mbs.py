"""Exploratory (README part 1): the references beside the pipelines (every rank; one rank alone) and the whole model's in-group figure, at the smallest and largest pipeline size, and their ratios."""
import json,sys,statistics as st,warnings
warnings.simplefilter("ignore")
from collections import defaultdict
from autoplan.profile.formats import ModelProfile
from autoplan.plan.pipeline_costs import _unit_times
for f in sys.argv[1:]:
    d=json.load(open(f)); prof=ModelProfile.from_dict(d)
    g=defaultdict(list); lone=defaultdict(list); steps=defaultdict(list)
    for t in prof.pipeline_timings:
        g[t.mbs].append(t.reference_s); lone[t.mbs].append(t.lone_reference_s)
    w=prof.pipeline_timings[0].world
    out=[]
    for m in sorted(g):
        wm=prof.whole_model_timing(m,w); u=_unit_times(prof,w,m)
        out.append((m, round(st.median(g[m])*1e3,1), round(st.median(lone[m])*1e3,1), round((wm.forward_s+wm.backward_s)*1e3,1), round(sum(u.total_s)*1e3,1)))
    (m1,r1,l1,w1,u1),(m4,r4,l4,w4,u4)=out[0],out[-1]
    print(f.split('/')[-2], f.split('/')[-1], out, f"ref ratio {r4/r1:.2f} lone ratio {l4/l1:.2f} wholegroup ratio {w4/w1:.2f} units ratio {u4/u1:.2f}")
