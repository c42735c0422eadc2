"""Re-predict a fidelity workload's measured layouts from its own profile, with the pipeline costs of
micro-batch 1 only (what main does) and with every measured size (the branch): same profile, same
measurements, only the selection differs."""
import json, sys, statistics as st
from dataclasses import replace
from autoplan.plan.api import make_problem
from autoplan.plan.cost import evaluate
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.plan import Layout
for wd in sys.argv[1:]:
    r = json.load(open(f"{wd}/runs.json"))
    pb = make_problem(f"{wd}/model.json", f"{wd}/cluster.json", r["workload"]["global_batch"], precision="fp32",
                      memory_per_device_bytes=2**40)
    prof = pb.profile
    full = list(prof.pipeline_costs)
    runs = r.get("confirmed") or r["runs"]
    out = {}
    for tag, pc in (("mbs1-only", [c for c in full if c.mbs == min(x.mbs for x in full)] if full else []),
                    ("all sizes", full)):
        prof.pipeline_costs = pc
        errs = []
        for x in runs:
            if not x.get("measured"):
                continue
            lay = Layout.from_dict(x["layout"])
            pred = evaluate(prof, pb.cluster, lay, pb.train, layer_costs(prof, pb.cluster, lay, pb.train)).step_time_s
            errs.append((lay, pred, x["measured"]["step_time_s"], x["predicted"]["step_time_s"]))
        out[tag] = errs
    print(wd, "sizes:", sorted({c.mbs for c in full}))
    for tag, errs in out.items():
        e = [abs(p / m - 1) for _, p, m, _ in errs]
        pipe = [p / m for l, p, m, _ in errs if l.pp > 1]
        chosen = min(errs, key=lambda t: t[1])
        fastest = min(t[2] for t in errs)
        print(f"  {tag:10s} error {st.fmean(e)*100:.1f}% (max {max(e)*100:.1f}%), pipelines pred/meas median "
              f"{st.median(pipe) if pipe else float('nan'):.3f}; would choose {chosen[0].short()} "
              f"(+{(chosen[2]/fastest-1)*100:.1f}% from the fastest measured)")
    print("  stored predictions reproduced (mbs1-only):",
          all(abs(p - s) < 1e-6 * s for _, p, _, s in out["mbs1-only"]))
