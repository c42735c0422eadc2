"""Probes 20261207j part 6 (PREREGISTRATION.md): two launches per plan, alternating, of 20261207i's ``xp_worker.py
--full-step`` (X: validate's measure step, ``measure._trainer``'s own; P: the profile's pipeline step; the run of
04:41 UTC used ``part6_worker.py``, a copy of that worker with the same X, since folded into it).

    PYTHONPATH=. python docs/probes/20261207j/part6.py SHAPE OUTDIR PLAN... > docs/probes/20261207j/part6.out
"""
import os
import statistics as st
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261206h"))
from phases_worker import launch_worker   # noqa: E402

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261207i", "xp_worker.py")
OPTIMIZER_TERM_S = 0.0036      # the model's optimizer term for both plans under Pnow


def main() -> None:
    shape, outdir, plans = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(outdir, exist_ok=True)
    for launch in range(1, 3):
        for n, plan in enumerate(plans):
            out = os.path.join(outdir, f"part6_plan{n}_launch{launch}.json")
            d = launch_worker(plan, out, f"plan {n} launch {launch}", ["--spec", shape, "--full-step"], worker=WORKER)
            if d is None:
                continue
            x, p = st.median(d["X"]), st.median(d["P"])
            dd = x - p
            print(f"{time.strftime('%H:%M:%S')} {os.path.basename(plan)} launch {launch}: X {x * 1e3:.1f} ms, "
                  f"P {p * 1e3:.1f} ms, D {dd * 1e3:+.1f} ms; D - optimizer term = {(dd - OPTIMIZER_TERM_S) * 1e3:+.1f} ms "
                  f"= {(dd - OPTIMIZER_TERM_S) / p:+.1%} of P", flush=True)


if __name__ == "__main__":
    main()
