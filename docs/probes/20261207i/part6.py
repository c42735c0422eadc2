"""Probes 20261207i part 6 (PREREGISTRATION.md): the executor's step against the profile's pipeline step, in turn in
the same processes (xp_worker.py), pp4 1F1B at mbs1x16 and mbs4x4, two launches each, alternating.

    PYTHONPATH=. python docs/probes/20261207i/part6.py PLAN_MBS1 PLAN_MBS4 SHAPE OUTDIR > docs/probes/20261207i/part6.out
"""
import os
import statistics as st
import sys

from autoplan.plan.plan import Plan

from launches import launch_worker

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "xp_worker.py")


def slots(L):
    return L.num_microbatches + L.pp - 1


def main():
    plan1, plan4, shape, out = sys.argv[1:5]
    os.makedirs(out, exist_ok=True)
    for rep in range(2):
        for path in (plan1, plan4):
            L = Plan.load(path).layout
            r = launch_worker(path, os.path.join(out, f"xp_mbs{L.mbs}_{rep}.json"), f"{L.short()} launch {rep}",
                              ["--spec", shape], worker=WORKER, tail_chars=1500)
            if r is None:
                continue
            x, pp = st.median(r["X"]), st.median(r["P"])
            paired = st.median(a - b for a, b in zip(r["X"], r["P"]))
            print(f"{L.short()} stages {[len(s) for s in L.stages]} launch {rep}: X {x * 1e3:.0f} ms, P {pp * 1e3:.0f} ms, "
                  f"X/P {x / pp - 1:+.1%}; paired X-P median {paired * 1e3:+.1f} ms = {paired / slots(L) * 1e3:+.2f} ms "
                  f"per slot ({slots(L)} slots)", flush=True)


if __name__ == "__main__":
    main()
