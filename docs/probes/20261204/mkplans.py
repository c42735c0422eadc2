import json
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout, SolverInfo
d = json.load(open("/work/exp/f16/w1/runs.json"))
pb = make_problem("/work/exp/f16/w1/model.json", "/work/exp/f16/w1/cluster.json", 16, memory_per_device_bytes=2**30)
for i, name in ((1, "f1b"), (2, "ilv")):
    lay = Layout.from_dict(d["confirmed"][i]["layout"])
    p = estimate_problem(pb, lay); p = p[1] if isinstance(p, tuple) else p
    pb.plan(lay, p, SolverInfo("n/a", 0.0, 0.0, 0.0)).save(f"/work/exp/{name}.json")
