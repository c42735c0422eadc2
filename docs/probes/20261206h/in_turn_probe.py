"""Probes 20261206h: is a layout timed in turn beside nine others (the fidelity harness's judge table) slower than
the same layout launched alone (what validate and a training run see)? PREREGISTRATION.md, second part.

    PYTHONPATH=. python docs/probes/20261206h/in_turn_probe.py /work/exp/s23/shape160x8/w0 2,5,7 OUTDIR [ROUNDS=2]

Uses the workload's stored in-turn plans (plan-in-turn-*.json). Two rounds, the second in reverse order, of:
  A    each chosen layout launched alone, 4 timed steps after 2 (validate's)
  A12  each chosen layout launched alone, 12 timed steps after 2 (the in-turn job's count)
  T3   the chosen layouts in turn in one job, 12 steps each after 2
  T10  all the stored layouts in turn in one job, 12 steps each after 2 (the harness's first in-turn job)
Prints every launch's median and steps, then the ratios T10/A12, T3/A12, A12/A (geometric means over layouts and
rounds)."""
import json
import math
import statistics as st
import sys
import time
from pathlib import Path

from autoplan.validate import _launch_measure

wl, pick, out = Path(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")], Path(sys.argv[3])
plans = sorted(wl.glob("plan-in-turn-*.json"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
out.mkdir(parents=True, exist_ok=True)
log = []


def launch(name, idx, steps):
    work = out / f"{name}-{len(log)}"
    work.mkdir()
    t0 = time.time()
    d, foreign = _launch_measure([plans[i] for i in idx], name, steps=steps, warmup=2, workdir=work, timeout_s=600)
    times = d["step_times_s"] if len(idx) > 1 else [d["step_times_s"]]
    for i, ts in zip(idx, times):
        log.append({"cond": name, "layout": i, "median_s": st.median(ts), "steps_s": ts, "foreign": foreign,
                    "start": t0})
        print(f"{time.strftime('%H:%M:%S')} {name:4s} L{i}: median {st.median(ts):.3f} s  steps "
              f"{' '.join(f'{x:.3f}' for x in ts)}  foreign {foreign:.2f}", flush=True)


def block(name):
    if name == "A":
        for i in pick:
            launch("A", [i], 4)
    elif name == "A12":
        for i in pick:
            launch("A12", [i], 12)
    elif name == "T3":
        launch("T3", pick, 12)
    else:
        launch("T10", list(range(len(plans))), 12)


order = ["A", "T10", "A12", "T3"]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 2
for name in (order + order[::-1])[:4 * rounds]:
    block(name)
(out / "log.json").write_text(json.dumps(log, indent=1))


def ratio(num, den):
    r = []
    for i in pick:
        a = [x["median_s"] for x in log if x["cond"] == num and x["layout"] == i]
        b = [x["median_s"] for x in log if x["cond"] == den and x["layout"] == i]
        r += [math.log(x / y) for x, y in zip(a, b)]
    return math.exp(st.mean(r)) - 1


for num, den in (("T10", "A12"), ("T3", "A12"), ("A12", "A"), ("T10", "A")):
    print(f"{num}/{den}: {ratio(num, den):+.1%} (geometric mean over layouts {pick} and both rounds)")
