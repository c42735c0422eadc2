"""Retro: the measured workloads re-predicted with the composition factor as shipped, and with a pipeline
stage carrying 1/pp of its excess (a stage holds about 1/pp of the model)."""
import json, glob, statistics as st, sys
import autoplan.plan.coefficients as C
from autoplan.plan.api import make_problem
from autoplan.plan.cost import evaluate
from autoplan.plan.plan import Layout
real = C.composition_factors
def variant(profile, world, mbs, _pp=[1]):
    f, o = real(profile, world, mbs)
    return 1 + (f - 1) / VAR_PP[0], o
VAR_PP = [1]
files = sorted(glob.glob("/work/exp/f2[1-9]/w*/runs.json") + glob.glob("/work/exp/s2[5-8]/work/w*/runs.json")
               + glob.glob("/work/exp/s04/work/w*/runs.json") + glob.glob("/work/exp/sh1*/w0/runs.json"))
tot = {"shipped": [], "variant": []}; picks = {"shipped": [], "variant": []}
for f in files:
    wd = f.rsplit("/", 1)[0]
    d = json.load(open(f)); runs = d.get("confirmed") or d["runs"]
    pb = make_problem(f"{wd}/model.json", f"{wd}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
    meas = [(Layout.from_dict(r["layout"]), r["measured"]["step_time_s"]) for r in runs if r.get("measured")]
    fastest = min(m for _, m in meas)
    for name in ("shipped", "variant"):
        preds = []
        for L, m in meas:
            if name == "variant":
                VAR_PP[0] = L.pp
                C.composition_factors = variant
            try:
                p = evaluate(pb.profile, pb.cluster, L, pb.train).step_time_s
            finally:
                C.composition_factors = real
            preds.append(p); tot[name].append(abs(p / m - 1))
        i = min(range(len(preds)), key=lambda k: preds[k])
        picks[name].append(meas[i][1] / fastest - 1)
for name in tot:
    pk = picks[name]
    print(f"{name:8s} {len(tot[name])} layouts error {100*st.fmean(tot[name]):.1f}%  picks within 5%: "
          f"{sum(x <= 0.05 for x in pk)}/{len(pk)}, sum of excess {100*sum(pk):.1f}%")
for f, a, b in zip(files, picks["shipped"], picks["variant"]):
    if abs(a - b) > 1e-9: print("  ", f.split("/exp/")[1][:22], f"{100*a:+.1f}% -> {100*b:+.1f}%")
