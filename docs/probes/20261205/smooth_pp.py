"""What-if, pre-registered before seeds 20261205/35/36 were read (written 2026-12-05 while they ran): as
../20261204h/smooth.py (where the whole model's in-group time per sample at one micro-batch size lies more than
4% under both neighbours, put that size on the line through its neighbours), but for pipelines only (pp > 1).

Why pipelines only: the whole model's in-group time at a size is exactly what a data-parallel rank runs, so a
dip there is the run's own; a pipeline stage holds a fraction of the layers and takes the whole model's
composition factor (whole / sum of layers) at that size, so the dip reaches it only through that factor.
Same measurements; only the profile point the pipelines are priced with differs. Re-ranks the measured layouts
(validate's top 10 as the cost model chose them), so it is approximate where the top 10 itself would move."""
import json, sys, statistics as st, copy, tempfile, os, warnings
warnings.simplefilter("ignore")
from autoplan.plan.api import make_problem
from autoplan.plan.cost import evaluate
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.plan import Layout


def predictions(wd, model_path, runs, gb):
    pb = make_problem(model_path, f"{wd}/cluster.json", gb, precision="fp32", memory_per_device_bytes=2**40)
    out = []
    for x in runs:
        lay = Layout.from_dict(x["layout"])
        out.append(evaluate(pb.profile, pb.cluster, lay, pb.train, layer_costs(pb.profile, pb.cluster, lay, pb.train)).step_time_s)
    return out


def summary(rows):
    chosen = min(rows, key=lambda t: t[1]); fastest = min(t[2] for t in rows)
    e = st.fmean(abs(p / m - 1) for _, p, m in rows)
    return e, chosen[0].short(), chosen[2] / fastest - 1


def dips_of(m):
    w = m.get("whole_model_timings") or []
    g = {x["mbs"]: x for x in w if x.get("dp", 1) == 1 and x.get("tp", 1) == 1}
    sizes = sorted(g); ps = {s: (g[s]["forward_s"] + g[s]["backward_s"]) / s for s in sizes}
    return sizes, ps, [s for a, s, b in zip(sizes, sizes[1:], sizes[2:]) if ps[s] < 0.96 * min(ps[a], ps[b])]


for wd in sys.argv[1:]:
    try:
        m = json.load(open(f"{wd}/model.json")); r = json.load(open(f"{wd}/runs.json"))
    except (OSError, ValueError):
        continue
    runs = [x for x in (r.get("confirmed") or r["runs"]) if x.get("measured") and x["measured"].get("in_turn_s")] \
        or [x for x in r["runs"] if x.get("measured")]
    sizes, ps, dips = dips_of(m)
    if not dips or len(runs) < 3:
        continue
    m2 = copy.deepcopy(m)
    for s in dips:
        i = sizes.index(s); a, b = sizes[i - 1], sizes[i + 1]
        f = (ps[a] + (ps[b] - ps[a]) * (s - a) / (b - a)) / ps[s]
        for x in m2["whole_model_timings"]:
            if x["mbs"] == s:
                x["forward_s"] *= f; x["backward_s"] *= f; x["backward_sync_s"] *= f
    fd, tmp = tempfile.mkstemp(suffix=".json"); os.write(fd, json.dumps(m2).encode()); os.close(fd)
    gb = r["workload"]["global_batch"]
    try:
        lays = [Layout.from_dict(x["layout"]) for x in runs]
        meas = [x["measured"]["step_time_s"] for x in runs]
        p0 = predictions(wd, f"{wd}/model.json", runs, gb)
        p1 = predictions(wd, tmp, runs, gb)
        pp_only = [b if lay.pp > 1 else a for lay, a, b in zip(lays, p0, p1)]
        rows = lambda p: list(zip(lays, p, meas))
        e0, c0, x0 = summary(rows(p0)); e1, c1, x1 = summary(rows(pp_only))
        print(f"{wd.split('/exp/')[-1]} (world {r['workload']['world']}, dip at {dips}): as profiled error {e0*100:.1f}%, "
              f"chooses {c0} {x0*100:+.1f}%; pipelines smoothed error {e1*100:.1f}%, chooses {c1} {x1*100:+.1f}%")
    except Exception as e:
        print(wd, "failed:", str(e).splitlines()[0][:150])
    os.unlink(tmp)
