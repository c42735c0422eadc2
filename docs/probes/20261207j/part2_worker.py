"""Probes 20261207j part 2's worker (under torchrun, 4 processes; PREREGISTRATION.md): pp4 1F1B at mbs1 x16 and mbs4 x4
(fixed stages) timed in turn at the job's start (``early``), then the profile's whole-model and layer cases
(``group_measure.measure_in_groups`` without pipelines), then the early-built runs again beside the same runs built
now (``late``), in turn. Rank 0 writes {condition: [the slowest rank's seconds per round]} and the cases' wall time.

    python -m torch.distributed.run --standalone --nproc-per-node 4 part2_worker.py --spec SHAPE --out OUT
"""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, init_process_group, run_worker
from autoplan.execute.pipeline_profile import pipeline_step

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_args, in_turn   # noqa: E402

RUNS = ((1, 16), (4, 4))


def main() -> int:
    ap = argparse.ArgumentParser()
    add_args(ap)
    ap.add_argument("--chunks", default="2,3,3,2")
    a = ap.parse_args()

    def body():
        torch.set_num_threads(1)
        init_process_group("gloo")
        device = torch.device("cpu")
        sizes = tuple(int(x) for x in a.chunks.split(","))
        cfg = gm.GroupProfileConfig(spec=a.spec, mbs_list=(1, 2, 4), pipelines=False)
        job = gm._Job(cfg, device)

        def build(tag: str) -> dict:
            return {f"{tag} mbs{mbs}": pipeline_step(job, 4, 1, "1f1b", m, mbs, device, sizes)[1] for mbs, m in RUNS}
        early = build("early")
        out = {f"before: {k}": v for k, v in in_turn(early, a.rounds, a.warmup, device, slowest_each=True).items()}
        t0 = time.perf_counter()
        gm.measure_in_groups(cfg, device)
        cases_s = time.perf_counter() - t0
        late = build("late")
        out.update({f"after: {k}": v for k, v in in_turn({**early, **late}, a.rounds, a.warmup, device, slowest_each=True).items()})
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump({"cases_s": cases_s, "steps_s": out}, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
