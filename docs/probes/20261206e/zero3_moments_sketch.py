"""The sketch the ZeRO-3 change was checked with before it was written into the cost model: the ten stored
ZeRO-3 runs (zero3_jobs.txt: workload, tag, dp, mbs, global batch, predicted and measured peak bytes as stored),
their stored breakdowns re-added as two moments: beside the activations (state, activations, the output gradient,
the root unit and three largest blocks) and at the end of the backward (state with every gradient, four root units).
With an argument, the sharded gradients are left out of the first (not made yet with one micro-batch).

    python docs/probes/20261206e/zero3_moments_sketch.py [late]"""
import json, os, sys
for line in open(os.path.join(os.path.dirname(__file__), 'zero3_jobs.txt')):
    w,tag,dp,mbs,gb,p,m=line.split(); dp=int(dp)
    d=json.load(open(w+'/runs.json')); mp=json.load(open(w+'/model.json'))
    r=[r for r in d['runs'] if r['layout'].get('zero')==3][0]
    bd=r['predicted']['memory_breakdown_bytes']
    R=sum(v['param_bytes'] for k,v in mp['kinds'].items() if k!='block'); B=mp['kinds']['block']['param_bytes']
    maxl=max(v['param_bytes'] for v in mp['kinds'].values())
    static=bd['params_grads_optimizer']; act=bd['activations']; ws=bd['workspace']
    nblk=sum(1 for l in mp['layers'] if l['kind']=='block')
    P=R+nblk*B; gsh=P/dp; S=static-gsh; outg=ws-3*maxl
    late = len(sys.argv)>1
    base = S if late else static
    m_act=base+act+outg+R+3*B
    m_end=static+4*R
    new=max(m_act,m_end)
    print(f"{tag} | measured {int(m)/1e6:6.1f} old {int(p)/1e6:6.1f} ({int(p)/int(m)-1:+.1%}) new {new/1e6:6.1f} ({new/int(m)-1:+.1%}) act-moment {m_act/1e6:.1f} end {m_end/1e6:.1f}")
