"""What the executor's data-parallel wrapper adds to a pipelined step, side by side in one job.

    torchrun --nproc-per-node 4 benchmarks/pipelined_dp_probe.py SHAPE.json PLAN.json     (ROUNDS=8)

PLAN: a ``dp x pp`` plan of SHAPE (``autoplan solve ... --layout dp=2,pp=2,mbs=1 --out PLAN.json``).
Alternating, ROUNDS times after 2 warm-up rounds: the profile's own pipeline run at the plan's pp, vp,
schedule, micro-batches and size (:func:`autoplan.execute.pipeline_profile.pipeline_step`: even chunks,
pipelines tiling the job, no wrapper), the executor's step without the DP wrapper (with and without
AdamW), and with it (FSDP2 for ZeRO-0 under a pipeline). Prints the medians of the slowest rank's time.
docs/fidelity.md ("Data parallel measured inside the profile's pipelines") has what it showed."""

from __future__ import annotations

import os
import statistics
import sys

import torch
import torch.distributed as dist

import autoplan.execute.apply as apply
from autoplan.execute.data import synthetic_batch
from autoplan.execute.dp import DPWrapped
from autoplan.execute.group_measure import GroupProfileConfig, _agree_max, _Job, _timed
from autoplan.execute.pipeline_profile import pipeline_step
from autoplan.models.registry import model_vocab
from autoplan.models.source import resolve_plan_model
from autoplan.plan.plan import Plan


def executor_step(plan: Plan, wrapped: bool):
    """The executor's step of ``plan`` (``step(with_optimizer)``), with or without its DP wrapper."""
    real = apply.apply_dp
    if not wrapped:
        apply.apply_dp = lambda module, blocks, mesh, **kw: DPWrapped(module=module, runner=module)
    try:
        model = resolve_plan_model(plan.training.model_spec, plan.training.shape).build(0)
        par = apply.parallelize(model, plan)
    finally:
        apply.apply_dp = real
    opt = torch.optim.AdamW(par.parameters(), lr=1e-3)
    tokens, labels = synthetic_batch(0, plan.layout.global_batch, plan.training.seq_len, model_vocab(model), 0)
    tokens, labels = par.batch_slice(tokens), par.batch_slice(labels)

    def step(with_optimizer: bool) -> None:
        par.step(tokens, labels)
        if with_optimizer:
            par.optimizer_step(opt)
        opt.zero_grad(set_to_none=True)
    return step


def main() -> None:
    shape, plan_file = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    cpu = torch.device("cpu")
    plan = Plan.load(plan_file)
    lay = plan.layout
    job = _Job(GroupProfileConfig(spec=shape, mbs_list=(lay.mbs,)), cpu)
    _, profile_run = pipeline_step(job, lay.pp, lay.vp, lay.schedule, lay.num_microbatches, lay.mbs, cpu)
    plain, wrapped = executor_step(plan, False), executor_step(plan, True)
    cases = {"profile's pipeline run": profile_run,
             "executor, no DP, no optimizer": lambda: plain(False),
             "executor, no DP, AdamW": lambda: plain(True),
             "executor, FSDP2, AdamW": lambda: wrapped(True),
             "executor, FSDP2, no optimizer": lambda: wrapped(False)}
    times: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(2 + int(os.environ.get("ROUNDS", 8))):
        for name, fn in cases.items():
            t = _agree_max(_timed(fn, cpu))       # the slowest rank's seconds, started together
            if r >= 2:
                times[name].append(t)
    if dist.get_rank() == 0:
        print(plan_file, lay.short())
        for name, v in times.items():
            print(f"  {name:30s} median {statistics.median(v) * 1e3:7.1f} ms  "
                  f"(min {min(v) * 1e3:.1f}, max {max(v) * 1e3:.1f})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
