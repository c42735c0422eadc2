import sys, glob, os, dataclasses, statistics
sys.path.insert(0, __import__('os').path.dirname(__file__))
import autoplan.plan.pipeline_costs as pc
import autoplan.plan.coefficient_sources as cs
from retro import evaluate
MODE=sys.argv[1]
if MODE=='e1':
    pc.IDLE_SHARE_GRID=1  # grid 0,1
    orig=pc.fit_pipeline_costs
if MODE=='eonly1':
    import types
    src=pc.fit_pipeline_costs
    def f(profile, world, pp=0):
        old=pc.IDLE_SHARE_GRID; 
        return src(profile, world, pp)
if MODE=='ddpmbs':
    import autoplan.plan.coefficients as co
    orig=cs.in_group_ddp_s_per_param
    CUR={}
    def ddp(profile, layout, world):
        if world < 2 or layout.dp != world or layout.tp > 1 or layout.pp > 1 or layout.cp > 1 or layout.lossy: return None
        added = {g.mbs: g.backward_sync_s - g.backward_s for g in profile.whole_model_timings if g.key() == (world, 1, 0, 1, 1) and g.backward_sync_s > 0}
        if layout.mbs in added: return max(0.0, added[layout.mbs])/profile.total_params()
        return orig(profile, layout, world)
    for mod in list(sys.modules.values()):
        if mod and getattr(mod,'in_group_ddp_s_per_param',None) is orig: setattr(mod,'in_group_ddp_s_per_param',ddp)
wls=sorted(w for w in glob.glob('/work/exp/s1*/d*/w*') if os.path.exists(w+'/runs.json'))
evaluate(wls, verbose='-v' in sys.argv)
