import json, sys
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout, SolverInfo
wd, short, out = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(f"{wd}/runs.json"))
pb = make_problem(f"{wd}/model.json", f"{wd}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
for r in d["runs"]:
    L = Layout.from_dict(r["layout"])
    if L.short() == short:
        lay, pred = estimate_problem(pb, L)
        pb.plan(lay, pred, SolverInfo("n/a", 0, 0, 0)).save(out)
        print("saved", short, pred.step_time_s, r["measured"]["step_time_s"])
        break
else:
    print([Layout.from_dict(r["layout"]).short() for r in d["runs"]])
