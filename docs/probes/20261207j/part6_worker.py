"""Probes 20261207j part 6's worker (under torchrun on a pp plan; PREREGISTRATION.md): validate's measure step (``X``:
``par.step``, the optimizer step, ``zero_grad``) and the profile's ``pipeline_step`` of the same layout (``P``), in the
same processes, timed in turn with the order alternating. Rank 0 writes {"X": [...], "P": [...]} (the slowest rank's
seconds per round)."""
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "20261206h"))
from phases_worker import add_worker_args, launched   # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    add_worker_args(ap)
    ap.add_argument("--spec", required=True, help="the shape JSON the group job builds")
    a = ap.parse_args()

    def body() -> None:
        run = launched(a.plan)
        par, opt, lay = run.par, run.opt, run.plan.layout
        job = gm._Job(gm.GroupProfileConfig(spec=a.spec, mbs_list=(lay.mbs,)), par.device)
        _, p_step = pipeline_step(job, lay.pp, 1, "1f1b", lay.num_microbatches, lay.mbs, par.device,
                                  tuple(len(s) for s in lay.stages))

        def x_step(i):        # validate's measure step (measure._trainer's one_step)
            par.step(*run.rows(i))
            par.optimizer_step(opt)
            par.after_optimizer_step()
            opt.zero_grad(set_to_none=True)
        out = {"X": [], "P": []}
        for i in range(a.warmup + a.rounds):
            for k in (("X", "P") if i % 2 == 0 else ("P", "X")):
                _, s = _timed_step(x_step if k == "X" else (lambda _: p_step()), i, run.use_cuda, par.device)
                if i >= a.warmup:
                    out[k].append(s)
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump(out, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
