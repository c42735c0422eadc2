"""For each stored workload with per-job profiles: each layout predicted with each job's profile alone and with the
combined one; how the per-layout error about the workload's median splits into profile noise and the rest."""
import glob, json, math, statistics as st, warnings
from pathlib import Path
warnings.simplefilter("ignore")
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout

rows = []
for d in sorted(glob.glob("docs/probes/20261207o/stored/*/model-job1.json")):
    d = Path(d).parent
    runs = json.load(open(d / "runs.json"))
    gb = runs["workload"]["global_batch"]
    conf = runs.get("confirmed") or []
    meas = {json.dumps(r["layout"], sort_keys=True): r["measured"]["step_time_s"] for r in conf if r.get("measured")}
    if len(meas) < 3:
        continue
    preds = {}
    for name in ["model", "model-job1", "model-job2", "model-job3"]:
        pb = make_problem(str(d / f"{name}.json"), str(d / "cluster.json"), gb)
        p = {}
        for r in conf:
            k = json.dumps(r["layout"], sort_keys=True)
            if k in meas:
                lay = Layout.from_dict(r["layout"])
                p[k] = estimate_problem(pb, lay)[1].step_time_s
        preds[name] = p
    keys = list(meas)
    stored = {json.dumps(r["layout"], sort_keys=True): r["predicted"]["step_time_s"] for r in conf}
    chk = max(abs(preds["model"][k] / stored[k] - 1) for k in keys)
    def resid(p):
        e = [math.log(p[k] / meas[k]) for k in keys]
        m = st.median(e)
        return [x - m for x in e]
    def norm(p):
        m = st.median([math.log(p[k] / preds["model"][k]) for k in keys])
        return {k: math.log(p[k] / preds["model"][k]) - m for k in keys}
    r_comb = resid(preds["model"])
    jobdev = [norm(preds[f"model-job{j}"]) for j in (1, 2, 3)]
    sd_job = st.pstdev([v for jd in jobdev for v in jd.values()])
    fastest = min(keys, key=meas.get)
    picks = [min(keys, key=preds[n].get) for n in preds]
    miss = [meas[p] / meas[fastest] - 1 for p in picks]
    print(f"{str(d)[10:]:32s} n{len(keys):2d} stored-check {chk:.1e}  resid sd {st.pstdev(r_comb):.3f}  "
          f"job-vs-comb sd {sd_job:.3f}  chosen miss comb/j1/j2/j3 " + " ".join(f"{100*m:+.1f}" for m in miss))
    rows.append((st.pstdev(r_comb), sd_job, miss))
print("median resid sd", st.median(r[0] for r in rows), "median job sd", st.median(r[1] for r in rows))
print("misses >5%: comb", sum(r[2][0] > .05 for r in rows), "per job", [sum(r[2][j] > .05 for r in rows) for j in (1, 2, 3)], "of", len(rows))
