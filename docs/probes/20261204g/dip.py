import json,glob,statistics as st,os
from collections import defaultdict


def workloads():
    """(workload dir, its runs.json, per-sample whole-model in-group seconds by mbs) of every stored workload
    that has both files (the stores of the earlier sessions under /work/exp)."""
    for mf in sorted(glob.glob('/work/exp/*/w*/model.json')+glob.glob('/work/exp/*/*/w*/model.json')):
        d=os.path.dirname(mf); rf=d+'/runs.json'
        if not os.path.exists(rf): continue
        m=json.load(open(mf)); r=json.load(open(rf))
        yield d, r, {w['mbs']:(w['forward_s']+w['backward_s'])/w['mbs'] for w in m.get('whole_model_timings',[])}


rows=[]
for d, r, wm in workloads():
    ks=sorted(wm)
    if len(ks)<3: continue
    dip={}
    for i,k in enumerate(ks):
        if 0<i<len(ks)-1:
            a,b=ks[i-1],ks[i+1]; lin=wm[a]+(wm[b]-wm[a])*(k-a)/(b-a); dip[k]=wm[k]/lin
    runs=r.get('confirmed') or r.get('runs')
    # per-layout ratio pred/measured; ratio normalised by workload median
    rat=[(x['layout'].get('mbs'),x['predicted']['step_time_s']/x['measured']['step_time_s'],x['layout'].get('pp',1)) for x in runs if x.get('measured')]
    if not rat: continue
    med=st.median(q for _,q,_ in rat)
    for mbs,q,pp in rat:
        if mbs in dip: rows.append((dip[mbs],q/med,d,mbs,pp))
print(len(rows))
# bin by dip
bins=defaultdict(list)
for dp,q,d,mbs,pp in rows:
    b='<0.92' if dp<0.92 else '0.92-0.97' if dp<0.97 else '0.97-1.03' if dp<1.03 else '1.03-1.08' if dp<1.08 else '>1.08'
    bins[b].append(q)
for b in ['<0.92','0.92-0.97','0.97-1.03','1.03-1.08','>1.08']:
    if bins[b]: print(b, len(bins[b]), 'median rel ratio %.3f'%st.median(bins[b]), 'workloads', len({d for dp,q,d,m,p in rows if (dp<0.92 if b=='<0.92' else False)}))
import math
xs=[math.log(dp) for dp,*_ in rows]; ys=[math.log(q) for _,q,*_ in rows]
mx,my=st.fmean(xs),st.fmean(ys)
cov=sum((x-mx)*(y-my) for x,y in zip(xs,ys)); vx=sum((x-mx)**2 for x in xs)
print('slope of log(rel ratio) on log(dip): %.2f'%(cov/vx), 'corr %.2f'%(cov/math.sqrt(vx*sum((y-my)**2 for y in ys))))
print('--- non-monotone: middle point below both neighbours per sample, and the later neighbour above by >5%')
rows2=[]
for d, r, wm in workloads():
    ks=sorted(wm)
    vmin=set(k for i,k in enumerate(ks) if 0<i<len(ks)-1 and wm[k]<wm[ks[i-1]] and wm[ks[i+1]]>1.05*wm[k])
    runs=r.get('confirmed') or r.get('runs')
    rat=[(x['layout'].get('mbs'),x['predicted']['step_time_s']/x['measured']['step_time_s']) for x in runs if x.get('measured')]
    if not rat: continue
    med=st.median(q for _,q in rat)
    for mbs,q in rat: rows2.append((mbs in vmin, q/med, d))
for flag in (True,False):
    sel=[q for f,q,d in rows2 if f==flag]
    print(flag, len(sel), len({d for f,q,d in rows2 if f==flag}), 'median rel %.3f'%st.median(sel) if sel else '')
