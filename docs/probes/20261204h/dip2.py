"""Whole-model in-group time per sample by micro-batch size, every stored fidelity workload: where size 2 lies."""
import json,glob,statistics as st
from collections import defaultdict
out=defaultdict(list)
for mf in sorted(glob.glob('/work/exp/**/w*/model.json',recursive=True)):
    try: m=json.load(open(mf))
    except Exception: continue
    w=m.get('whole_model_timings') or []
    ps={g['mbs']:(g['forward_s']+g['backward_s'])/g['mbs'] for g in w if g.get('dp',1)==1 and g.get('tp',1)==1}
    if not {1,2,4}<=set(ps): continue
    world=w[0]['world']
    line=ps[1]+(ps[4]-ps[1])/3     # straight line through 1 and 4 at 2
    out[world].append((ps[2]/line-1, ps[2]/min(ps[1],ps[4])-1, mf))
for world,v in sorted(out.items()):
    a=[x[0] for x in v]; b=[x[1] for x in v]
    print(f"world {world}: {len(v)} workloads; size 2 vs the line through 1 and 4: median {st.median(a)*100:+.1f}%; "
          f"below both neighbours by >4%: {sum(x< -0.04 for x in b)}")
for world,v in sorted(out.items()):
    for x in v:
        if 's8/' in x[2] or 's6/d31/w1' in x[2]: print(world, '%+.1f%% %+.1f%%'%(x[0]*100,x[1]*100), x[2].split('/exp/')[-1])
