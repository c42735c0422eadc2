"""Does a layout timed in turn run slower because the step before it was another layout's?  (Hypothesis H's
mechanism, for the next session; written 2026-12-07 while part 1 ran, NOT RUN in this session.)

One torchrun job builds the given plans side by side (as ``validate --confirm`` does) and times them four ways,
one after the other, each ``--rounds`` timed steps per plan after ``--warmup`` untimed ones:

1. ``turn``:    one timed step of each plan in turn, the order rotated each round (``measure_in_turn``);
2. ``settle``:  the same, but each timed step follows one untimed step of the same plan;
3. ``blocks``:  each plan's steps all together (warm-up, then its timed steps), plan after plan;
4. ``turn2``:   ``turn`` again (the machine's drift over the job).

If H's cause is the step before (on 3 processes over 2 cores the scheduler's state after a pipeline step, or
the allocator's), ``settle`` and ``blocks`` should bring data parallel's ratio to the pipelines' back to its
single-launch value; if it is having all the plans resident, none of them will.  Each step also records every
rank's own wall time and CPU time (``time.process_time``), to see whether the ranks of a step are unbalanced.

    python -m torch.distributed.run --nproc-per-node 3 docs/probes/20261207n/settle_probe.py \
        --plan W/plan-in-turn-0.json W/plan-in-turn-2.json --rounds 12 --out settle.json
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist

from autoplan.execute.measure import _init, _trainer, turn_order
from autoplan.plan.plan import Plan


def timed(one_step, i: int) -> dict:
    dist.barrier()
    w0, c0 = time.perf_counter(), time.process_time()
    one_step(i)
    mine = torch.tensor([time.perf_counter() - w0, time.process_time() - c0], dtype=torch.float64)
    every = [torch.zeros(2, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return {"step_s": max(float(t[0]) for t in every), "wall_s": [float(t[0]) for t in every],
            "cpu_s": [float(t[1]) for t in every]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--plan", nargs="+", required=True)
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    _init()
    plans = [Plan.load(f) for f in a.plan]
    steps = [_trainer(pl, 0)[2] for pl in plans]
    n, out, i = len(steps), {}, 0
    for k in range(n):                                  # warm-up of every plan, untimed
        for _ in range(a.warmup):
            steps[k](i)
            i += 1

    def turn(name: str, settle: bool) -> None:
        nonlocal i
        res = [[] for _ in range(n)]
        for r in range(a.rounds):
            for k in turn_order(n, r):
                if settle:
                    steps[k](i)
                    i += 1
                res[k].append(timed(steps[k], i))
                i += 1
        out[name] = res

    turn("turn", False)
    turn("settle", True)
    res = [[] for _ in range(n)]
    for k in range(n):
        for _ in range(a.warmup):
            steps[k](i)
            i += 1
        for _ in range(a.rounds):
            res[k].append(timed(steps[k], i))
            i += 1
    out["blocks"] = res
    turn("turn2", False)
    if dist.get_rank() == 0:
        with open(a.out, "w") as f:
            json.dump({"plans": a.plan, **out}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
