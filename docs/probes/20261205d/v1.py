import sys, dataclasses
sys.path.insert(0, __import__('os').path.dirname(__file__))
import autoplan.plan.cost as cost
import autoplan.plan.pipeline_costs as pc
from retro import evaluate, stored_workloads
CUR={}
orig_eval=cost.evaluate
def ev(profile, cluster, layout, train, costs=None):
    CUR['p']=profile; CUR['l']=layout; CUR['w']=cluster.world_size
    return orig_eval(profile, cluster, layout, train, costs)
cost.evaluate=ev
import autoplan.plan.api  # noqa: F401  (loaded, so the loop below replaces its evaluate too)
for mod in list(sys.modules.values()):
    if mod and getattr(mod,'evaluate',None) is orig_eval and mod is not cost: setattr(mod,'evaluate',ev)
def ratio(p, w, mbs):
    unit=pc._unit_times(p,w,mbs)
    if unit is None: return None
    alone=sum(p.kinds[i.kind].timing(mbs).forward_s + p.kinds[i.kind].timing(mbs).backward_s for i in p.layers)
    return sum(unit)/alone
orig_relief=pc.pipeline_relief
MODE=sys.argv[1]
def relief(costs, busy, pipe):
    p,l,w=CUR['p'],CUR['l'],CUR['w']
    if MODE=='mbs' and l.mbs!=costs.mbs:
        a,b=ratio(p,w,l.mbs), ratio(p,w,costs.mbs)
        if a and b:
            costs=dataclasses.replace(costs, slowdown=max(1.0,costs.slowdown*a/b))
    return orig_relief(costs,busy,pipe)
cost.pipeline_relief=relief
wls = stored_workloads()
evaluate(wls, verbose='-v' in sys.argv)
