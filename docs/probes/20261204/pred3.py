import json, sys
from autoplan.plan.api import make_problem, estimate_problem, solve_problem
from autoplan.plan.plan import Layout
wd = sys.argv[1]; gb = int(sys.argv[2])
d = json.load(open(f"/work/exp/f16/w1/runs.json"))
pb = make_problem(f"{wd}/model.json", f"{wd}/cluster.json", gb, memory_per_device_bytes=2**30)
truth = {0: 1.142, 1: 1.113, 2: 1.078}
for i in range(10):
    lay = Layout.from_dict(d["confirmed"][i]["layout"])
    p = estimate_problem(pb, lay); p = p[1] if isinstance(p, tuple) else p
    t = truth.get(i)
    print(f"{lay.short():58s} pred {p.step_time_s:.3f}" + (f"  truth {t:.3f} ({p.step_time_s/t-1:+.1%})" if t else f"  once {d['confirmed'][i]['measured']['step_time_s']:.3f}"))
