import sys, statistics as st
from dataclasses import replace
import autoplan.plan.pipeline_costs as pc
def with_factor(profile, runs):
    refs = {}
    for t in runs:
        if t.reference_s > 0: refs.setdefault((t.mbs, t.world), []).append(t.reference_s)
    med = {k: sorted(v)[len(v) // 2] for k, v in refs.items()}
    out = []
    for t in runs:
        w = profile.whole_model_timing(t.mbs, t.world); r = med.get((t.mbs, t.world))
        if w is not None and r is not None: t = replace(t, step_s=t.step_s * (w.forward_s + w.backward_s) / r)
        out.append(t)
    return out
pc.on_layer_scale = with_factor
orig_fit = pc.fit_pipeline_costs
sys.argv = ["variants.py"] + sys.argv[1:]
# variants.py patches pc.on_layer_scale; make fit_pipeline_costs call it
def fit(profile, world, pp=0):
    keep = profile.pipeline_timings
    profile.pipeline_timings = pc.on_layer_scale(profile, [t for t in keep if t.world == world]) + [t for t in keep if t.world != world]
    try:
        return orig_fit(profile, world, pp)
    finally:
        profile.pipeline_timings = keep
pc.fit_pipeline_costs = fit
import runpy; runpy.run_path("retro_scale.py", run_name="__main__")
