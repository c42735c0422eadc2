"""Probes 20261207i part 6's worker (under torchrun, as a plan's launch): the executor's step (X: ``par.step``, the
loss all-reduce waited for, gradients dropped) and the profile's pipeline step (P:
:func:`autoplan.execute.pipeline_profile.pipeline_step` with the plan's stages, the same model copy's weights), timed
in turn in the same processes, one step each per round, the order alternating. Rank 0 writes
{"X": [...], "P": [...]} (the slowest rank's seconds per round)."""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json
import os
import sys

import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, run_worker
from autoplan.execute.measure import _timed_step
from autoplan.execute.pipeline_profile import pipeline_step

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261206h"))
from phases_worker import add_worker_args, launched   # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    add_worker_args(ap)
    ap.add_argument("--spec", required=True, help="the model spec the group job builds (the shape JSON)")
    ap.add_argument("--full-step", action="store_true",
                    help="X is validate's whole measure step, the optimizer's included (20261207j part 6)")
    a = ap.parse_args()

    def body() -> None:
        run = launched(a.plan)
        par, lay = run.par, run.plan.layout
        assert lay.dp == 1 and lay.tp == 1 and lay.vp == 1 and lay.pp == dist.get_world_size()
        job = gm._Job(gm.GroupProfileConfig(spec=a.spec, mbs_list=(lay.mbs,)), par.device)
        sizes = tuple(len(s) for s in lay.stages)
        _, p_step = pipeline_step(job, lay.pp, 1, "1f1b", lay.num_microbatches, lay.mbs, par.device, sizes)

        def x_step(i):
            if a.full_step:
                return run.one_step(i)
            par.step(*run.rows(i))
            par.zero_grad()
        out = {"X": [], "P": []}
        for i in range(a.warmup + a.rounds):
            order = ("X", "P") if i % 2 == 0 else ("P", "X")
            for k in order:
                _, s = _timed_step(x_step if k == "X" else (lambda _: p_step()), i, run.use_cuda, par.device)
                if i >= a.warmup:
                    out[k].append(s)
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump(out, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
