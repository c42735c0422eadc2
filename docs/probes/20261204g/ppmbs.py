import json,glob,statistics as st,os
from collections import defaultdict
b=defaultdict(list); wl=defaultdict(set)
for rf in sorted(glob.glob('/work/exp/*/w*/runs.json')+glob.glob('/work/exp/*/*/w*/runs.json')):
    r=json.load(open(rf)); runs=r.get('confirmed') or r.get('runs')
    rat=[(x['layout'],x['predicted']['step_time_s']/x['measured']['step_time_s']) for x in runs if x.get('measured')]
    dp=[q for l,q in rat if l.get('pp',1)==1]
    if not dp: continue
    ref=st.median(dp)   # relative to the workload's non-pipeline layouts
    for l,q in rat:
        if l.get('pp',1)>1:
            key=(min(l.get('mbs'),4), 'pp%d'%l['pp'])
            b[key].append(q/ref); wl[key].add(rf)
for k in sorted(b): print(k, len(b[k]), len(wl[k]), 'median pipeline/DP ratio %.3f'%st.median(b[k]))
