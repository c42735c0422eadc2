"""Probes 20261207i part 3, E5: pp4 mbs4x4 and mbs1x16 launched once each (phases_worker.py) with the profile's stage
split (3, 2, 3, 2). Run from the repository root with PYTHONPATH=.; plans and results under /work/exp/s25."""
import statistics as st

from launches import PHASES_WORKER, launch_worker, plan_with_stages

for src, name in (("plan4.json", "E5_mbs4x4"), ("plan0.json", "E5_mbs1x16")):
    path = plan_with_stages(f"/work/exp/s25/p1/launch/{src}", (3, 2, 3, 2), f"/work/exp/s25/p3/{name}_plan.json")
    d = launch_worker(path, f"/work/exp/s25/p3/{name}.json", name, worker=PHASES_WORKER, tail_chars=1500)
    if d is not None:
        print(name, {k: round(st.median(v) * 1e3) for k, v in d.items()}, flush=True)
