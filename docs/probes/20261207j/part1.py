"""Probes 20261207j part 1 (PREREGISTRATION.md): make the dp4 plans of the 160x8 shape, run ``part1_worker.py`` in
JOBS separate jobs, print each job's medians and H1's figure.

    PYTHONPATH=. python docs/probes/20261207j/part1.py WORKDIR [JOBS] > docs/probes/20261207j/part1.out

WORKDIR holds shape.json (the 160x8 shape), P1.json (a model profile of it) and cluster.json (4 processes)."""
import json
import os
import statistics as st
import subprocess
import sys
import time
from pathlib import Path

from autoplan.execute.launch import torchrun_command
from autoplan.plan.api import estimate_problem, make_problem
from autoplan.plan.layout_input import parse_layout_constraints
from autoplan.plan.plan import Layout, SolverInfo

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    wd, jobs = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2
    pb = make_problem(str(wd / "P1.json"), str(wd / "cluster.json"), 16, memory_per_device_bytes=2**30)
    plans = []
    for mbs in (1, 2, 4):
        L, pr = estimate_problem(pb, Layout(**parse_layout_constraints(f"dp=4,tp=1,pp=1,mbs={mbs},m={4 // mbs},zero=0")))
        path = wd / f"dp4_mbs{mbs}.json"
        pb.plan(L, pr, SolverInfo("n/a", 0.0, 0.0, 0.0)).save(path)
        plans.append(path)
        print(f"{L.short()}: predicted {pr.step_time_s * 1e3:.0f} ms")
    for j in range(1, jobs + 1):
        out = wd / f"part1_job{j}.json"
        t0 = time.time()
        cmd = torchrun_command(plans[0], os.path.join(HERE, "part1_worker.py"),
                               ["--spec", str(wd / "shape.json"), "--plans", *map(str, plans), "--out", str(out)])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            print(f"job {j} failed: {(p.stderr or p.stdout)[-1500:]}")
            continue
        med = {k: st.median(v) for k, v in json.load(open(out)).items()}
        e1, e4, w1, w4 = med["E1"], med["E4"], med["W1"], med["W4"]
        print(f"job {j} ({time.strftime('%H:%M:%S')}, {time.time() - t0:.0f} s): "
              + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in med.items()) + " ms")
        print(f"  E1/E4 {e1 / e4:.3f}, W1/W4 {w1 / w4:.3f}; (E1 - E4) - (W1 - W4) = {(e1 - e4 - w1 + w4) * 1e3:+.1f} ms"
              f" = {(e1 - e4 - w1 + w4) / e4:+.1%} of E4; E4 - W4 - O = {(e4 - w4 - med['O']) * 1e3:+.1f} ms, "
              f"E1 - W1 - O = {(e1 - w1 - med['O']) * 1e3:+.1f} ms")


if __name__ == "__main__":
    main()
