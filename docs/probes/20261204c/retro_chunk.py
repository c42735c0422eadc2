"""Variants of the pipeline's per-chunk cost at micro-batch sizes the profile's runs do not measure:
constant (today) or in proportion to the whole model's in-group time at the layout's size."""
import json, sys, glob, os, statistics as st, copy
import autoplan.plan.pipeline_costs as pc
import autoplan.plan.cost as cost
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
orig_scale, orig_chunk = pc.on_layer_scale, cost.per_chunk_s
CUR = {}
def chunk_scaled(costs, layout):
    p = CUR["p"]
    w = lambda m: (lambda g: g.forward_s + g.backward_s)(p.whole_model_timing(m, costs.world))
    return orig_chunk(costs, layout) * w(layout.mbs) / w(costs.mbs)
VARIANTS = {"current": (orig_scale, orig_chunk), "noscale": (lambda p, r: list(r), orig_chunk),
            "chunk~mbs": (orig_scale, chunk_scaled), "noscale+chunk~mbs": (lambda p, r: list(r), chunk_scaled)}
rows = {v: [] for v in VARIANTS}
for wl in sorted(w for a in sys.argv[1:] for w in glob.glob(a) if os.path.exists(w + "/runs.json")):
    d = json.load(open(f"{wl}/runs.json")); meas = {}
    for r in d["runs"] + d.get("confirmed", []):
        meas.setdefault(Layout.from_dict(r["layout"]).short(), (r["layout"], []))[1].append(r["measured"]["step_time_s"])
    if not any(Layout.from_dict(l).pp > 1 for l, _ in meas.values()): continue
    base = ModelProfile.load(f"{wl}/model.json")
    line = [wl]
    for name, (sc, ch) in VARIANTS.items():
        pc.on_layer_scale, cost.per_chunk_s = sc, ch
        p = copy.deepcopy(base)
        p.pipeline_costs = [c2 for c2 in (pc.fit_pipeline_costs(p, c.world, c.pp) for c in base.pipeline_costs) if c2]
        p.save("/tmp/v_model.json")
        pb = make_problem("/tmp/v_model.json", f"{wl}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
        CUR["p"] = pb.profile
        out = []
        for k, (lay, v) in meas.items():
            _, pr = estimate_problem(pb, Layout.from_dict(lay))
            out.append((pr.step_time_s, st.median(v), Layout.from_dict(lay).pp > 1, k))
        errs = [a / m - 1 for a, m, _, _ in out]
        pipe = [a / m - 1 for a, m, pp, _ in out if pp]
        pick = min(out)[1] / min(x[1] for x in out) - 1
        rows[name].append((st.mean(map(abs, errs)), st.mean(pipe), pick))
        line.append(f"{name}: {st.mean(map(abs, errs)):.1%} {st.mean(pipe):+.1%} {pick:+.1%}")
    pc.on_layer_scale, cost.per_chunk_s = orig_scale, orig_chunk
    print(" | ".join(line), flush=True)
for name, r in rows.items():
    print(f"{name:18s} n={len(r)} mean|err| {st.mean(x[0] for x in r):.1%} pipes signed {st.mean(x[1] for x in r):+.1%} |pipes| {st.mean(abs(x[1]) for x in r):.1%} picks>5% {sum(x[2] > 0.05 for x in r)} mean pick {st.mean(x[2] for x in r):+.1%}")
