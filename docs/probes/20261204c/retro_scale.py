"""Re-predict every measured layout of fidelity workloads with the profile's pipeline costs refitted
under variants of pipeline_costs.on_layer_scale; per variant: mean |err|, pipelines' signed error, picks."""
import json, sys, glob, statistics as st, copy
import autoplan.plan.pipeline_costs as pc
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
from dataclasses import replace
orig = pc.on_layer_scale

def scale_with(stat):
    def f(profile, runs):
        refs = {}
        for t in runs:
            if t.reference_s > 0: refs.setdefault((t.mbs, t.world), []).append(t.reference_s)
        out = []
        for t in runs:
            whole = profile.whole_model_timing(t.mbs, t.world); v = refs.get((t.mbs, t.world))
            if whole is not None and v:
                t = replace(t, step_s=t.step_s * (whole.forward_s + whole.backward_s) / stat(v))
            out.append(t)
        return out
    return f
VARIANTS = {"current": orig, "none": lambda p, r: list(r), "median": scale_with(st.median)}
def measured(wl):
    d = json.load(open(f"{wl}/runs.json")); meas = {}
    for r in d["runs"] + d.get("confirmed", []):
        meas.setdefault(Layout.from_dict(r["layout"]).short(), (r["layout"], []))[1].append(r["measured"]["step_time_s"])
    return d, {k: (l, st.median(v)) for k, (l, v) in meas.items()}
rows = {v: [] for v in VARIANTS}
for wl in sorted(w for p in sys.argv[1:] for w in glob.glob(p) if __import__("os").path.exists(w + "/runs.json")):
    d, meas = measured(wl)
    if not any(Layout.from_dict(l).pp > 1 for l, _ in meas.values()): continue
    base = ModelProfile.load(f"{wl}/model.json")
    line = [wl]
    for name, fn in VARIANTS.items():
        pc.on_layer_scale = fn
        p = copy.deepcopy(base)
        p.pipeline_costs = [c2 for c2 in (pc.fit_pipeline_costs(p, c.world, c.pp) for c in base.pipeline_costs) if c2]
        p.save("/tmp/v_model.json")
        pb = make_problem("/tmp/v_model.json", f"{wl}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
        out = []
        for k, (lay, m) in meas.items():
            _, pr = estimate_problem(pb, Layout.from_dict(lay))
            out.append((pr.step_time_s, m, Layout.from_dict(lay).pp > 1, k))
        errs = [a / m - 1 for a, m, _, _ in out]
        pipe = [a / m - 1 for a, m, pp, _ in out if pp]
        pick = min(out)[1] / min(x[1] for x in out) - 1
        rows[name].append((st.mean(map(abs, errs)), st.mean(pipe), pick))
        line.append(f"{name}: {st.mean(map(abs, errs)):.1%} pipes {st.mean(pipe):+.1%} pick {pick:+.1%}")
    pc.on_layer_scale = orig
    print(" | ".join(line), flush=True)
for name, r in rows.items():
    print(f"{name:8s} n={len(r)} mean|err| {st.mean(x[0] for x in r):.1%} pipes signed {st.mean(x[1] for x in r):+.1%} |pipes| {st.mean(abs(x[1]) for x in r):.1%} picks>5% {sum(x[2] > 0.05 for x in r)} mean pick {st.mean(x[2] for x in r):+.1%}")
