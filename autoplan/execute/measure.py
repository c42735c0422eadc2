"""Measure one plan: step time and peak memory per rank (run under torchrun; used by validate).

    python -m torch.distributed.run --nproc-per-node 4 -m autoplan.execute.measure \
        --plan plan.json --steps 5 --warmup 2 --out measured.json

Timed steps start together (a barrier before each); a step's time is the slowest rank's, and the
figure is the median over timed steps. Memory is measured on one more, untimed step: peak live
tensor bytes per rank (see :mod:`autoplan.profile.memory`). Rank 0 writes::

    {"step_times_s": [...], "median_step_time_s": ..., "peak_memory_bytes": max over ranks,
     "peak_memory_per_rank_bytes": [...], "peak_rss_bytes": max over ranks, "losses": [...]}
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


def measure(plan: Plan, *, steps: int, warmup: int, seed: int = 0) -> dict:
    layout, training = plan.layout, plan.training
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if use_cuda else "gloo")
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

    losses, times = [], []
    for i in range(warmup + steps):
        dist.barrier()
        if use_cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        losses.append(one_step(i))
        if use_cuda:
            torch.cuda.synchronize()
        dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=par.device)  # NCCL: on the GPU
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)       # the step ends when the slowest rank ends
        if i >= warmup:
            times.append(float(dt))
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="measure a plan's step time and peak memory")
    p.add_argument("--plan", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="JSON written by rank 0")
    args = p.parse_args(argv)

    def body() -> None:
        result = measure(Plan.load(args.plan), steps=args.steps, warmup=args.warmup, seed=args.seed)
        if dist.get_rank() == 0:
            write_json_atomic(args.out, result)
    return run_worker(body)


if __name__ == "__main__":
    from autoplan.execute.launch import exit_worker
    exit_worker(main())
