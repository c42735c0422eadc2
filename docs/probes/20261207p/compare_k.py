"""Exploratory, in-sample (docs/probes/20261207p): seed 20261263's workloads 0-2 profiled again at the
pipelines-two-mbs branch (20261207o/reprofiled: pipelines at mbs 1 and 4), their stored first in-turn jobs
predicted with main's cost code (new1: the mbs-1 pipeline terms only) and with a scale k on the pipelines' layer
time at the layout's micro-batch size (k_experiment.patch applied, AUTOPLAN_K=ref|one|all). Paired: the same
profile, the same measured steps.  Usage (from a checkout with the patch):
PYTHONPATH=. python docs/probes/20261207p/compare_k.py OLD_DIR NEW_DIR [OLD_DIR NEW_DIR ...]"""
import json, statistics as st, sys, tempfile, warnings, os
from pathlib import Path
warnings.simplefilter("ignore")
sys.path.insert(0, "docs/probes/20261207o")
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
from common import scores
def predict(model_path, cluster, gb, layouts, k):
    if k: os.environ["AUTOPLAN_K"] = k
    else: os.environ.pop("AUTOPLAN_K", None)
    pb = make_problem(str(model_path), str(cluster), gb)
    return [estimate_problem(pb, L)[1].step_time_s for L in layouts]
pooled = {}
args = sys.argv[1:]
tmp = tempfile.mkdtemp()
for old, new in zip(args[::2], args[1::2]):
    old, new = Path(old), Path(new)
    d = json.load(open(old / "runs.json"))
    gb = d["workload"]["global_batch"]
    conf = [r for r in d["confirmed"] if r.get("measured")]
    lays = [Layout.from_dict(r["layout"]) for r in conf]
    meas = [r["measured"]["step_time_s"] for r in conf]
    p = ModelProfile.load(str(new / "model.json"))
    lo = min(t.mbs for t in p.pipeline_timings)
    p.pipeline_costs = [c for c in p.pipeline_costs if c.mbs == lo]
    small = Path(tmp) / f"{new.name}-small.json"; p.save(str(small))
    preds = {"new1": predict(small, old / "cluster.json", gb, lays, None),
             "new1+k(references)": predict(small, old / "cluster.json", gb, lays, "ref"),
             "new1+k(one run)": predict(small, old / "cluster.json", gb, lays, "one"),
             "new1+k(all runs)": predict(small, old / "cluster.json", gb, lays, "all")}
    print(f"{d['workload']['shape']['name']:20s} w{d['workload']['world']}")
    for k, pr in preds.items():
        sc = scores(lays, pr, meas)
        e, err, rho, miss, k_mbs = sc["errors"], sc["err"], sc["rho"], sc["miss"], sc["slope"]
        sgn = st.median(e)
        v = pooled.setdefault(k, {"err": [], "slope": [], "miss": [], "rho": []})
        v["err"].append(err); v["miss"].append(miss); v["rho"].append(rho)
        if k_mbs is not None: v["slope"].append(k_mbs)
        print(f"   {k:18s}: err {100*err:4.1f}% signed median {100*sgn:+.1f}% pp-signed {100*st.median([x for x,L in zip(e,lays) if L.pp>1]):+.1f}% dp-signed {(100*st.median([x for x,L in zip(e,lays) if L.pp==1])) if any(L.pp==1 for L in lays) else 0:+.1f}% rho {rho:+.2f} slope {'  -  ' if k_mbs is None else f'{100*k_mbs:+4.1f}%'} chosen {100*miss:+4.1f}% ", flush=True)
for k, v in pooled.items():
    print(f"{k:18s}: {len(v['err'])} workloads, error {100*st.mean(v['err']):.1f}%, rank {st.mean(v['rho']):.2f}, slope median {100*st.median(v['slope']):+.1f}%, within 5% {sum(m <= 0.05 for m in v['miss'])} of {len(v['miss'])} (worst {100*max(v['miss']):+.1f}%)")
