"""Probes 20261207i part 3b, E6: pp4 mbs4x4 and mbs1x16 with the stage splits (2, 3, 3, 2) and (3, 2, 3, 2),
alternating, two launches each (phases_worker.py, 8 rounds). Run from the repository root with PYTHONPATH=.; plans
and results under /work/exp/s25."""
import statistics as st

from launches import PHASES_WORKER, launch_worker, plan_with_stages

for rep in range(2):
    for src, tag in (("plan4.json", "mbs4x4"), ("plan0.json", "mbs1x16")):
        for sizes in ((2, 3, 3, 2), (3, 2, 3, 2)):
            name = f"E6_{tag}_{''.join(map(str, sizes))}_{rep}"
            path = plan_with_stages(f"/work/exp/s25/p1/launch/{src}", sizes, f"/work/exp/s25/p3/{name}_plan.json")
            d = launch_worker(path, f"/work/exp/s25/p3/{name}.json", name, ["--rounds", "8"], worker=PHASES_WORKER)
            if d is not None:
                print(name, {k: round(st.median(v) * 1e3) for k, v in d.items()}, flush=True)
