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
import time

import torch
import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, init_process_group, run_worker
from autoplan.execute.measure import turn_order
from autoplan.execute.pipeline_profile import pipeline_step

RUNS = ((1, 16), (4, 4))


def in_turn(steps: dict, rounds: int, warmup: int, device) -> dict[str, list[float]]:
    """Each of ``steps`` ({name: closure}) once per round, the order rotated: {name: the slowest rank's seconds}."""
    names = list(steps)
    got = {k: [] for k in names}
    for r in range(warmup + rounds):
        for k in turn_order(len(names), r):
            t = gm._timed(steps[names[k]], device)
            t = gm._agree_max(t)
            if r >= warmup:
                got[names[k]].append(t)
    return got


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--chunks", default="2,3,3,2")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)
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
        out = {f"before: {k}": v for k, v in in_turn(early, a.rounds, a.warmup, device).items()}
        t0 = time.perf_counter()
        gm.measure_in_groups(cfg, device)
        cases_s = time.perf_counter() - t0
        late = build("late")
        out.update({f"after: {k}": v for k, v in in_turn({**early, **late}, a.rounds, a.warmup, device).items()})
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump({"cases_s": cases_s, "steps_s": out}, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
