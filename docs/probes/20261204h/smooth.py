"""What-if, from stored profiles and measurements: where the whole model's in-group time per sample at one
micro-batch size lies more than 4% under both neighbours, put that size on the straight line through its
neighbours (per sample) and re-predict the measured layouts. Same measurements; only that profile point differs."""
import json, sys, glob, statistics as st, copy, tempfile, os, warnings
warnings.simplefilter("ignore")
from autoplan.plan.api import make_problem
from autoplan.plan.cost import evaluate
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.plan import Layout
def predict(wd, model_path, runs, gb):
    pb = make_problem(model_path, f"{wd}/cluster.json", gb, precision="fp32", memory_per_device_bytes=2**40)
    out = []
    for x in runs:
        if not x.get("measured"): continue
        lay = Layout.from_dict(x["layout"])
        p = evaluate(pb.profile, pb.cluster, lay, pb.train, layer_costs(pb.profile, pb.cluster, lay, pb.train)).step_time_s
        out.append((lay, p, x["measured"]["step_time_s"]))
    return out
def summary(errs):
    chosen = min(errs, key=lambda t: t[1]); fastest = min(t[2] for t in errs)
    e = st.fmean(abs(p/m-1) for _, p, m in errs)
    return f"error {e*100:.1f}%, chooses {chosen[0].short()} {(chosen[2]/fastest-1)*100:+.1f}%"
for wd in sys.argv[1:]:
    try:
        m = json.load(open(f"{wd}/model.json")); r = json.load(open(f"{wd}/runs.json"))
    except (OSError, ValueError):
        continue
    runs = [x for x in (r.get("confirmed") or r["runs"]) if x.get("measured") and x["measured"].get("in_turn_s")] or r["runs"]
    w = m.get("whole_model_timings") or []
    g = {x["mbs"]: x for x in w if x.get("dp", 1) == 1 and x.get("tp", 1) == 1}
    sizes = sorted(g); ps = {s: (g[s]["forward_s"] + g[s]["backward_s"]) / s for s in sizes}
    dips = [s for a, s, b in zip(sizes, sizes[1:], sizes[2:]) if ps[s] < 0.96 * min(ps[a], ps[b])]
    if not dips or len(runs) < 3: continue
    m2 = copy.deepcopy(m)
    for s in dips:
        i = sizes.index(s); a, b = sizes[i-1], sizes[i+1]
        want = ps[a] + (ps[b] - ps[a]) * (s - a) / (b - a)
        for x in m2["whole_model_timings"]:
            if x["mbs"] == s:
                f = want / ps[s]; x["forward_s"] *= f; x["backward_s"] *= f; x["backward_sync_s"] *= f
    fd, tmp = tempfile.mkstemp(suffix=".json"); os.write(fd, json.dumps(m2).encode()); os.close(fd)
    gb = r["workload"]["global_batch"]
    try:
        print(f"{wd.split('/exp/')[-1]} (world {r['workload']['world']}, dip at {dips}): as profiled {summary(predict(wd, f'{wd}/model.json', runs, gb))}; "
              f"smoothed {summary(predict(wd, tmp, runs, gb))}")
    except Exception as e:
        print(wd, "failed:", str(e).splitlines()[0][:150])
    os.unlink(tmp)
