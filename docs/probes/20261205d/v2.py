"""v2.py none|e1|ddpmbs: the idle share fitted on {0, 1} only (e1); DDP's added time per micro-batch size
instead of the median over sizes (ddpmbs)."""
import sys
sys.path.insert(0, __import__('os').path.dirname(__file__))
import autoplan.plan.pipeline_costs as pc
import autoplan.plan.coefficient_sources as cs
from retro import evaluate, stored_workloads
MODE = sys.argv[1]
if MODE == 'e1':
    pc.IDLE_SHARE_GRID = 1  # grid 0, 1
if MODE == 'ddpmbs':
    orig = cs.in_group_ddp_s_per_param

    def ddp(profile, layout, world):
        if world < 2 or layout.dp != world or layout.tp > 1 or layout.pp > 1 or layout.cp > 1 or layout.lossy:
            return None
        added = {g.mbs: g.backward_sync_s - g.backward_s for g in profile.whole_model_timings
                 if g.key() == (world, 1, 0, 1, 1) and g.backward_sync_s > 0}
        if layout.mbs in added:
            return max(0.0, added[layout.mbs]) / profile.total_params()
        return orig(profile, layout, world)
    for mod in list(sys.modules.values()):
        if mod and getattr(mod, 'in_group_ddp_s_per_param', None) is orig:
            setattr(mod, 'in_group_ddp_s_per_param', ddp)
evaluate(stored_workloads(), verbose='-v' in sys.argv)
