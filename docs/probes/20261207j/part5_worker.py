"""Probes 20261207j part 5's worker (under torchrun on a pp4 plan; PREREGISTRATION.md): the profile's ``pipeline_step``
of the plan's layout at its stages, timed alone in rounds; with ``--launch`` the plan is first built as validate's
measure builds it (the executor's trainer, kept in memory). Rank 0 writes {"P": [the slowest rank's seconds per
round]}."""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, init_process_group, run_worker
from autoplan.plan.plan import Plan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_args, in_turn, plan_pipeline_step   # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    add_args(ap)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--launch", action="store_true", help="B: build the executor's trainer first, as validate does")
    a = ap.parse_args()

    def body():
        plan = Plan.load(a.plan)
        lay = plan.layout
        kept = None
        if a.launch:
            from autoplan.execute.measure import _init, _trainer
            _init()
            kept = _trainer(plan, 0)
        else:
            torch.set_num_threads(1)
            init_process_group("gloo")
        device = torch.device("cpu")
        job = gm._Job(gm.GroupProfileConfig(spec=a.spec, mbs_list=(lay.mbs,)), device)
        step = plan_pipeline_step(job, lay, device)
        got = in_turn({"P": step}, a.rounds, a.warmup, device, slowest_each=True)
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump({**got, "threads": torch.get_num_threads()}, f)
        del kept
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
