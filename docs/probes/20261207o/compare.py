"""Exploratory, in-sample: the stored in-turn measurements of a workload (the first in-turn job, fidelity.py's judge)
predicted three ways: (old) the stored profile (pipelines at the smallest micro-batch only, as measured then);
(new-1) the new profile with its costs at the smallest size only (the old method on the new jobs); (new-2) the new
profile as this code reads it (costs at two sizes).  Usage: PYTHONPATH=. python compare.py OLD_DIR NEW_DIR ..."""
import json, math, statistics as st, sys, tempfile, warnings
from pathlib import Path
warnings.simplefilter("ignore")
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
from autoplan.validate import spearman
from common import slope


def predict(model_path, cluster, gb, layouts):
    pb = make_problem(str(model_path), str(cluster), gb)
    return [estimate_problem(pb, L)[1].step_time_s for L in layouts]


pooled = {k: {"err": [], "slope": [], "miss": [], "rho": []} for k in ("old", "new-1", "new-2")}
args = sys.argv[1:]
tmp = tempfile.mkdtemp()
for old, new in zip(args[::2], args[1::2]):
    old, new = Path(old), Path(new)
    if not (new / "model.json").exists():
        continue
    d = json.load(open(old / "runs.json"))
    gb = d["workload"]["global_batch"]
    conf = [r for r in d["confirmed"] if r.get("measured")]
    lays = [Layout.from_dict(r["layout"]) for r in conf]
    meas = [r["measured"]["step_time_s"] for r in conf]
    small_only = Path(tmp) / f"{new.name}-small-only.json"     # the new profile, its smallest-size costs only
    p = ModelProfile.load(str(new / "model.json"))
    lo = min(c.mbs for c in p.pipeline_costs)
    p.pipeline_costs = [c for c in p.pipeline_costs if c.mbs == lo]
    p.save(str(small_only))
    preds = {"old": predict(old / "model.json", old / "cluster.json", gb, lays),
             "new-1": predict(small_only, old / "cluster.json", gb, lays),
             "new-2": predict(new / "model.json", old / "cluster.json", gb, lays)}
    fastest = min(meas)
    line = f"{d['workload']['shape']['name']:20s} w{d['workload']['world']}"
    for k, pr in preds.items():
        e = [q / m - 1 for q, m in zip(pr, meas)]
        le = [math.log(q / m) for q, m in zip(pr, meas)]
        k_mbs = slope([(math.log2(L.mbs), x) for L, x in zip(lays, le) if L.pp > 1])
        pick = min(range(len(pr)), key=pr.__getitem__)
        miss = meas[pick] / fastest - 1
        rho = spearman(pr, meas)
        err = st.mean(abs(x) for x in e)
        pooled[k]["err"].append(err); pooled[k]["miss"].append(miss); pooled[k]["rho"].append(rho)
        if k_mbs is not None:
            pooled[k]["slope"].append(k_mbs)
        line += f" | {k}: err {100*err:4.1f}% rho {rho:+.2f} slope {'  -  ' if k_mbs is None else f'{100*k_mbs:+4.1f}%'} chosen {100*miss:+4.1f}%"
    print(line, flush=True)
for k, v in pooled.items():
    if v["err"]:
        print(f"{k:6s}: {len(v['err'])} workloads, error {100*st.mean(v['err']):.1f}%, rank {st.mean(v['rho']):.2f}, "
              f"slope per doubling median {100*st.median(v['slope']):+.1f}% (>0 in {sum(x > 0 for x in v['slope'])} of {len(v['slope'])}), "
              f"chosen within 5% on {sum(m <= 0.05 for m in v['miss'])} of {len(v['miss'])} (worst {100*max(v['miss']):+.1f}%)")
