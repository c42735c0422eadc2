"""Probes 20261207j, exploratory (04:33-04:40 UTC): 160x8 profiled now (Pnow, three jobs) and the six layouts of
20261207i part 7 launched in turn right after (12 steps each), against Pnow and P1 (02:27 UTC).

    autoplan profile model --model /work/exp/s25/p7/shape.json --mbs 1,2,4 --nproc 4 --out /work/exp/s26/Pnow.json
    PYTHONPATH=. python docs/probes/20261207j/now.py > docs/probes/20261207j/now.out
"""
import statistics as st, time
from pathlib import Path
from autoplan.plan.api import estimate_problem, make_problem
from autoplan.plan.plan import Plan
from autoplan.validate import _launch_measure
plans = [Path(f"/work/exp/s25/p7/plan{i}.json") for i in range(6)]
lays = [Plan.load(p).layout for p in plans]
preds = {}
for name in ("P1 (2026-12-07 02:27)", "Pnow (04:33)"):
    f = "/work/exp/s25/p7/P1.json" if name.startswith("P1") else "/work/exp/s26/Pnow.json"
    pb = make_problem(f, "/work/exp/s25/p7/cluster.json", 16, memory_per_device_bytes=2**30)
    preds[name] = [estimate_problem(pb, L)[1] for L in lays]
wd = Path("/work/exp/s26/now"); wd.mkdir(exist_ok=True)
d, foreign = _launch_measure(plans, "now", steps=12, warmup=2, workdir=wd, timeout_s=900)
meas = [st.median(t) for t in d["step_times_s"]]
print(time.strftime("%H:%M:%S"), "in-turn job of the six layouts, foreign", round(foreign, 2))
for L, m, i in zip(lays, meas, range(6)):
    print(f"{L.short():52s} measured {m*1e3:5.0f} ms; " + "; ".join(f"{k}: {preds[k][i].step_time_s*1e3:4.0f} ms ({m/preds[k][i].step_time_s-1:+.1%})" for k in preds))
