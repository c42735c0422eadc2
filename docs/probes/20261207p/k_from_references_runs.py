"""Exploratory (README part 1): k from the whole-model references timed beside the pipelines (needs k_experiment.patch: reference_k); the largest size's runs without and with it. Usage: PYTHONPATH=<patched checkout> python k_from_references_runs.py PROFILE.json ..."""
import sys, warnings
warnings.simplefilter("ignore")
from autoplan.profile.formats import ModelProfile
from autoplan.plan import pipeline_costs as pc
for f in sys.argv[1:]:
    prof = ModelProfile.load(f)
    w = prof.pipeline_timings[0].world
    lo = min(t.mbs for t in prof.pipeline_timings); hi = max(t.mbs for t in prof.pipeline_timings)
    costs = [c for c in prof.pipeline_costs if c.mbs == lo]
    # refit from mbs-lo runs with main's code
    keep = prof.pipeline_timings
    prof.pipeline_timings = [t for t in keep if t.mbs == lo]
    c1 = pc.fit_pipeline_costs(prof, w, 0)
    prof.pipeline_timings = keep
    k = pc.reference_k(prof, w, hi)
    units_hi = pc._unit_times(prof, w, hi)
    scaled = pc.UnitTimes([x * k for x in units_hi.total_s], [x * k for x in units_hi.forward_s])
    e0 = []; ek = []
    for t in keep:
        if t.mbs != hi: continue
        p0 = pc.predicted_step_s(t, units_hi, c1); pk = pc.predicted_step_s(t, scaled, c1)
        e0.append(p0 / t.step_s - 1); ek.append(pk / t.step_s - 1)
    print(f.split('/')[-2], f.split('/')[-1], f"k={k:.3f}", "mbs%d runs: err without k" % hi, [f"{x:+.0%}" for x in e0], "with k", [f"{x:+.0%}" for x in ek])
