"""Exploratory (README part 1): per profile, the scalar k on the layers' in-group time at the largest pipeline size that makes main's smallest-size pipeline terms meet the largest size's runs (solved on one 1F1B run of pp micro-batches, or the median over all); the other runs' error without and with it. Usage: PYTHONPATH=. python kfit.py PROFILE.json ..."""
import sys, statistics as st, warnings
warnings.simplefilter("ignore")
from autoplan.profile.formats import ModelProfile
from autoplan.plan import pipeline_costs as pc
def scaled(u, k): return pc.UnitTimes([x * k for x in u.total_s], [x * k for x in u.forward_s])
def solve_k(run, units, costs):
    lo, hi = 0.3, 3.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if pc.predicted_step_s(run, scaled(units, mid), costs) > run.step_s: hi = mid
        else: lo = mid
    return (lo + hi) / 2
def fit_k(prof, which):
    w = prof.pipeline_timings[0].world
    lo = min(t.mbs for t in prof.pipeline_timings); hi = max(t.mbs for t in prof.pipeline_timings)
    keep = prof.pipeline_timings
    prof.pipeline_timings = [t for t in keep if t.mbs == lo]
    out = {}
    for pp in sorted({t.pp for t in keep}):
        c1 = pc.fit_pipeline_costs(prof, w, pp)
        u = pc._unit_times(prof, w, hi)
        runs = [t for t in keep if t.mbs == hi and t.pp == pp]
        sel = [t for t in runs if which(t)]
        ks = [solve_k(t, u, c1) for t in sel]
        out[pp] = (st.median(ks) if ks else 1.0, c1, u, runs, sel)
    prof.pipeline_timings = keep
    return out, hi
if __name__ == "__main__":
    for f in sys.argv[1:]:
        prof = ModelProfile.load(f)
        for name, which in [("1f1b m=pp", lambda t: t.vp == 1 and t.num_microbatches == t.pp), ("all", lambda t: True)]:
            out, hi = fit_k(prof, which)
            for pp, (k, c1, u, runs, sel) in out.items():
                others = [t for t in runs if t not in sel] or runs
                e0 = [pc.predicted_step_s(t, u, c1) / t.step_s - 1 for t in others]
                ek = [pc.predicted_step_s(t, scaled(u, k), c1) / t.step_s - 1 for t in others]
                print(f.split('/')[-2], f.split('/')[-1], name, f"pp{pp} k={k:.3f} other mbs{hi} runs: without", [f"{x:+.0%}" for x in e0], "with", [f"{x:+.0%}" for x in ek])
