"""Probes 20261207i part 7 (PREREGISTRATION.md): profile, launch in turn, profile again, launch in turn.

    PYTHONPATH=. python docs/probes/20261207i/part7.py WORKDIR > docs/probes/20261207i/part7.out

WORKDIR holds shape.json (the 160x8 shape) and cluster.json (a 4-process cluster profile). Writes P1.json, P2.json,
the six plans and the in-turn jobs' results there."""
import json
import math
import statistics as st
import subprocess
import sys
import time
from pathlib import Path

from autoplan.plan.api import estimate_problem, make_problem
from autoplan.plan.layout_input import parse_layout_constraints
from autoplan.plan.plan import Layout, SolverInfo
from autoplan.validate import _launch_measure

SPECS = [f"dp={dp},tp=1,pp={pp},mbs={mbs},m={16 // dp // mbs},schedule=1f1b"
         for dp, pp in ((1, 4), (2, 2)) for mbs in (1, 2, 4)]


def profile(wd: Path, name: str) -> Path:
    t0 = time.time()
    subprocess.run([sys.executable, "-m", "autoplan.cli", "profile", "model", "--model", str(wd / "shape.json"),
                    "--mbs", "1,2,4", "--nproc", "4", "--out", str(wd / name)], check=True, capture_output=True)
    print(f"{time.strftime('%H:%M:%S')} profiled {name} in {time.time() - t0:.0f} s", flush=True)
    return wd / name


def in_turn(wd: Path, plans: list[Path], name: str) -> list[float]:
    work = wd / name
    work.mkdir(exist_ok=True)
    d, foreign = _launch_measure(plans, name, steps=12, warmup=2, workdir=work, timeout_s=900)
    meds = [st.median(ts) for ts in d["step_times_s"]]
    print(f"{time.strftime('%H:%M:%S')} {name}: " + ", ".join(f"{m * 1e3:.0f}" for m in meds) + f" ms (foreign {foreign:.2f})",
          flush=True)
    return meds


def main():
    wd = Path(sys.argv[1])
    p1 = profile(wd, "P1.json")
    pb1 = make_problem(str(p1), str(wd / "cluster.json"), 16, memory_per_device_bytes=2**30)
    layouts, plans = [], []
    for n, spec in enumerate(SPECS):
        L, pr = estimate_problem(pb1, Layout(**parse_layout_constraints(spec)))
        path = wd / f"plan{n}.json"
        pb1.plan(L, pr, SolverInfo("n/a", 0.0, 0.0, 0.0)).save(path)
        layouts.append(L)
        plans.append(path)
    runs = [in_turn(wd, plans, "T1"), in_turn(wd, plans, "T2")]
    p2 = profile(wd, "P2.json")
    runs.append(in_turn(wd, plans, "T3"))
    pb2 = make_problem(str(p2), str(wd / "cluster.json"), 16, memory_per_device_bytes=2**30)
    meas = [math.exp(st.mean(math.log(r[i]) for r in runs)) for i in range(len(layouts))]
    preds = {"P1": [estimate_problem(pb1, L)[1].step_time_s for L in layouts],
             "P2": [estimate_problem(pb2, L)[1].step_time_s for L in layouts]}
    for i, L in enumerate(layouts):
        print(f"{L.short()}: measured {meas[i] * 1e3:.0f} ms (in-turn jobs "
              + ", ".join(f"{r[i] * 1e3:.0f}" for r in runs) + "); "
              + ", ".join(f"{k} {v[i] * 1e3:.0f} ms ({meas[i] / v[i] - 1:+.1%})" for k, v in preds.items()))
    for k, v in preds.items():
        for fam, idx in (("pp4", (0, 2)), ("dp2 x pp2", (3, 5))):
            a, b = idx
            t = math.log(meas[b] / v[b]) - math.log(meas[a] / v[a])
            print(f"T ({fam}, {k}): {t:+.3f}")
    json.dump({"layouts": [L.short() for L in layouts], "runs_s": runs, "pred_s": preds},
              open(wd / "part7.json", "w"), indent=1)


if __name__ == "__main__":
    main()
