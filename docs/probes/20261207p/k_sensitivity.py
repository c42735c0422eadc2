"""Exploratory (README part 4), a sensitivity, not a model: the stored workloads' first in-turn jobs predicted with
their own profiles (main's cost code) and with the pipelines' layer time scaled by a k the same for every profile
(k_experiment.patch, AUTOPLAN_K=const: k at 4x the smallest profiled size, interpolated in log mbs, held beyond).
How far would a measured k of that size move the choice, the rank and the error?
Usage (patched checkout on PYTHONPATH): python k_sensitivity.py 1.0 0.95 0.9"""
import os, statistics as st, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
sys.path.insert(0, "docs/probes/20261207o")
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from common import scores, stored

ks = [float(x) for x in sys.argv[1:]] or [1.0, 0.95, 0.9]
rows = {k: [] for k in ks}
for p, d in stored("confirmed"):
    w = Path(p).parent
    if not (w / "model.json").exists():
        continue
    conf = [r for r in d["confirmed"] if r.get("measured")]
    lays = [Layout.from_dict(r["layout"]) for r in conf]
    meas = [r["measured"]["step_time_s"] for r in conf]
    line = f"{w.name:24s}"
    for k in ks:
        os.environ["AUTOPLAN_K"] = "const"
        os.environ["AUTOPLAN_K_AT_4X"] = str(k)
        pb = make_problem(str(w / "model.json"), str(w / "cluster.json"), d["workload"]["global_batch"])
        pr = [estimate_problem(pb, L)[1].step_time_s for L in lays]
        sc = scores(lays, pr, meas)
        rows[k].append((sc["err"], sc["rho"], sc["miss"], sc["slope"]))
        line += f" | k {k:.2f}: err {100*sc['err']:4.1f}% rho {sc['rho']:+.2f} chosen {100*sc['miss']:+5.1f}%"
    print(line, flush=True)
for k, v in rows.items():
    sl = [r[3] for r in v if r[3] is not None]
    print(f"k at 4x {k:.2f}: {len(v)} workloads, error {100*st.mean(r[0] for r in v):.1f}%, rank {st.mean(r[1] for r in v):.2f}, "
          f"slope median {100*st.median(sl):+.1f}%, chosen within 5% on {sum(r[2] <= 0.05 for r in v)} "
          f"(worst {100*max(r[2] for r in v):+.1f}%)")
