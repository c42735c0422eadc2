"""Measure one plan: step time and peak memory per rank (run under torchrun; used by validate).

    python -m torch.distributed.run --nproc-per-node 4 -m autoplan.execute.measure \
        --plan plan.json --steps 5 --warmup 2 --out measured.json

Timed steps start together (a barrier before each); a step's time is the slowest rank's, and the
figure is the median over timed steps. Memory is measured on one more, untimed step: peak live
tensor bytes per rank (see :mod:`autoplan.profile.memory`). Rank 0 writes::

    {"step_times_s": [...], "median_step_time_s": ..., "peak_memory_bytes": max over ranks,
     "peak_memory_per_rank_bytes": [...], "peak_rss_bytes": max over ranks, "losses": [...]}

With several plans (``--plan a.json b.json ...``, the same world) they are built side by side in one
job and timed in turn, one step of each after the other, the order rotated every round
(:func:`measure_in_turn`; ``validate --confirm``):
a drift in the machine's speed then falls on all of them alike, where separate launches, seconds or
minutes apart, each see the machine as it is then.  Rank 0 writes ``{"step_times_s": [[...], ...]}``,
one list per plan, in the order given.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

if __name__ == "__main__":     # a signal while torch imports ends the worker quietly (see launch.py)
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import torch
import torch.distributed as dist

from autoplan.execute.apply import parallelize
from autoplan.execute.launch import run_worker
from autoplan.execute.data import synthetic_batch
from autoplan.jsonio import write_json_atomic
from autoplan.models.registry import model_vocab
from autoplan.models.source import resolve_plan_model
from autoplan.plan.plan import Plan
from autoplan.profile.memory import LiveTensorTracker, state_tensors


def _init() -> bool:
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if use_cuda else "gloo")
    return use_cuda


def _trainer(plan: Plan, seed: int):
    """(the parallelized model, its optimizer, ``one_step(i)``: one whole training step on batch ``i``,
    returning its loss) of ``plan``: the model, wrappers and optimizer a script under ``autoplan run``
    trains with. The step waits for the loss (``par.step``) before the optimizer step, where the example
    scripts' ``par.train_step`` overlaps the loss all-reduce with it; timed side by side the two ways
    differed by -0.5..+3.1% (``docs/probes/20261206h`` part 3)."""
    layout, training = plan.layout, plan.training
    model = resolve_plan_model(training.model_spec, training.shape).build(seed)   # any model spec
    vocab = model_vocab(model)
    par = parallelize(model, plan)
    opt_cls = torch.optim.AdamW if training.optimizer == "adamw" else torch.optim.SGD
    opt = opt_cls(par.parameters(), lr=1e-3 if training.optimizer == "adamw" else 0.01)

    def one_step(i: int) -> float:
        tokens, labels = synthetic_batch(i, layout.global_batch, training.seq_len, vocab, seed)
        loss = par.step(par.batch_slice(tokens), par.batch_slice(labels))
        par.optimizer_step(opt)          # fp16: through the loss scaler
        par.after_optimizer_step()       # local SGD: periodic parameter averaging
        opt.zero_grad(set_to_none=True)
        return loss
    return par, opt, one_step


def _timed_step(step, i: int, use_cuda: bool, device) -> tuple[float, float]:
    """(loss, seconds of the slowest rank) of ``step(i)``, started behind a barrier."""
    dist.barrier()
    if use_cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    loss = step(i)
    if use_cuda:
        torch.cuda.synchronize()
    dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)  # NCCL: on the GPU
    dist.all_reduce(dt, op=dist.ReduceOp.MAX)       # the step ends when the slowest rank ends
    return loss, float(dt)


def measure(plan: Plan, *, steps: int, warmup: int, seed: int = 0) -> dict:
    use_cuda = _init()
    par, opt, one_step = _trainer(plan, seed)
    losses, times = [], []
    for i in range(warmup + steps):
        loss, dt = _timed_step(one_step, i, use_cuda, par.device)
        losses.append(loss)
        if i >= warmup:
            times.append(dt)
    # memory: one more, untimed step
    dist.barrier()
    if use_cuda:
        torch.cuda.reset_peak_memory_stats()
        one_step(warmup + steps)
        peak = torch.cuda.max_memory_allocated()
    else:
        with LiveTensorTracker(state_tensors(par.parameters(), opt)) as tracker:
            one_step(warmup + steps)
        peak = tracker.peak_bytes
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    per_rank = [None] * dist.get_world_size()
    dist.all_gather_object(per_rank, {"peak": int(peak), "rss": int(rss)})
    return {"step_times_s": times, "median_step_time_s": statistics.median(times),
            "peak_memory_bytes": max(r["peak"] for r in per_rank),
            "peak_memory_per_rank_bytes": [r["peak"] for r in per_rank],
            "peak_rss_bytes": max(r["rss"] for r in per_rank), "losses": losses}


def turn_order(n: int, round_: int) -> list[int]:
    """The order the ``n`` plans step in, in round ``round_``: rotated by one each round, so that no plan
    is always the first after the barrier or always follows the same other one."""
    return [(round_ + k) % n for k in range(n)]


def measure_in_turn(plans: list[Plan], *, steps: int, warmup: int, seed: int = 0) -> dict:
    """Every plan built in this job, ``warmup`` untimed steps of each, then ``steps`` rounds of one timed
    step of each plan in turn (:func:`turn_order`; module docstring): ``{"step_times_s": [[...] per plan]}``."""
    use_cuda = _init()
    trainers = [_trainer(p, seed) for p in plans]
    times: list[list[float]] = [[] for _ in plans]
    for i in range(warmup + steps):
        for k in turn_order(len(trainers), i):
            par, _, one_step = trainers[k]
            _, dt = _timed_step(one_step, i, use_cuda, par.device)
            if i >= warmup:
                times[k].append(dt)
    return {"step_times_s": times}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="measure a plan's step time and peak memory (several plans: in turn)")
    p.add_argument("--plan", required=True, nargs="+")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="JSON written by rank 0")
    args = p.parse_args(argv)

    def body() -> None:
        plans = [Plan.load(f) for f in args.plan]
        if len(plans) == 1:
            result = measure(plans[0], steps=args.steps, warmup=args.warmup, seed=args.seed)
        else:
            result = measure_in_turn(plans, steps=args.steps, warmup=args.warmup, seed=args.seed)
        if dist.get_rank() == 0:
            write_json_atomic(args.out, result)
    return run_worker(body)


if __name__ == "__main__":
    from autoplan.execute.launch import exit_worker
    exit_worker(main())
