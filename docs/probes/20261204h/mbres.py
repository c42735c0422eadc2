import json,glob,statistics as st,math
from collections import defaultdict
files=sorted(set(glob.glob('/work/exp/**/runs.json',recursive=True)))
rows=[]
for rf in files:
    try: r=json.load(open(rf))
    except Exception: continue
    for key in ('runs','confirmed'):
        runs=r.get(key)
        if not runs: continue
        if key=='confirmed':
            runs=[x for x in runs if x.get('measured') and x['measured'].get('in_turn_s')]
        rat=[(x['layout'],math.log(x['predicted']['step_time_s']/x['measured']['step_time_s'])) for x in runs if x.get('measured')]
        if len(rat)<3: continue
        med=st.median(q for _,q in rat)
        for l,q in rat:
            rows.append((key,rf,l,q-med,r['workload']['world']))
def feat(l):
    m=l.get('num_microbatches',1); pp=l.get('pp',1); vp=l.get('vp',1) or 1
    return m, pp, vp
for key in ('runs','confirmed'):
    R=[x for x in rows if x[0]==key]
    print(key, len(R), 'layouts', len({x[1] for x in R}),'workloads')
    b=defaultdict(list)
    for _,rf,l,res,w in R:
        m,pp,vp=feat(l)
        fam='dp' if pp==1 else ('pp%d%s'%(pp,'i' if vp>1 else ''))
        b[(fam,min(m,16))].append(res)
    for k in sorted(b):
        if len(b[k])>=5: print('  ',k,len(b[k]),'median resid %+.3f'%st.median(b[k]))
for key in ('runs','confirmed'):
    R=[x[3] for x in rows if x[0]==key]
    R.sort(); n=len(R)
    print(key,'resid quartiles %+.3f %+.3f, 10-90%% %+.3f %+.3f'%(R[n//4],R[3*n//4],R[n//10],R[9*n//10]))
