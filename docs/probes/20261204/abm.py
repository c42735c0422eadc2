"""A/B: measure given layouts of a fidelity workload in turn, several rounds, as validate measures."""
import json, sys, statistics
from pathlib import Path
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.validate import measure_layout
wd = Path(sys.argv[1]); gb = int(sys.argv[2]); rounds = int(sys.argv[3]); picks = [int(x) for x in sys.argv[4].split(",")]
extra = json.loads(sys.argv[5]) if len(sys.argv) > 5 else []
d = json.load(open(wd / "runs.json"))
pb = make_problem(str(wd / "model.json"), str(wd / "cluster.json"), gb, memory_per_device_bytes=2**30)
lays = [Layout.from_dict(d["confirmed"][i]["layout"]) for i in picks] + [Layout.from_dict(x) for x in extra]
res = {i: [] for i in range(len(lays))}
tmp = Path("/work/exp/ab"); tmp.mkdir(exist_ok=True)
for r in range(rounds):
    for i, lay in enumerate(lays):
        pred = estimate_problem(pb, lay)
        pred = pred[1] if isinstance(pred, tuple) else pred
        m = measure_layout(pb, lay, pred, steps=4, warmup=2, workdir=tmp)
        res[i].append(m.step_time_s)
        print(r, lay.short(), lay.stages if len(extra) else "", f"{m.step_time_s:.3f}", flush=True)
for i, lay in enumerate(lays):
    print(f"{lay.short():60s} median {statistics.median(res[i]):.3f}  all {' '.join(f'{x:.3f}' for x in res[i])}")
