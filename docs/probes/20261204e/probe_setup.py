"""Shared by gap.py, gap2.py and gap3.py (run from this folder): in a gloo job of the plan's world, the profile's pipeline run with the
plan's own split (``pipeline_profile.pipeline_step``) and the executor's step of the same plan without its DP
wrapper (``benchmarks/pipelined_dp_probe.executor_step``). ``docs/probes/20261204c/exab.py`` set up the same."""
import sys

sys.path.insert(0, "/work/main/benchmarks"); sys.path.insert(0, "/work/main/docs/probes/20261204c")
import torch
import torch.distributed as dist
from pipelined_dp_probe import executor_step

import autoplan.execute.pipeline_profile as pp_mod
from autoplan.execute.group_measure import GroupProfileConfig, _Job
from autoplan.plan.plan import Plan


def setup(shape: str, plan_file: str):
    """(the plan, the cpu device, the profile's pipeline run, the executor's step(with_optimizer))."""
    dist.init_process_group("gloo")
    cpu = torch.device("cpu")
    plan = Plan.load(plan_file)
    lay = plan.layout
    job = _Job(GroupProfileConfig(spec=shape, mbs_list=(lay.mbs,)), cpu)
    sizes = tuple(len(s) for s in lay.stages)
    _, prof = pp_mod.pipeline_step(job, lay.pp, lay.vp, lay.schedule, lay.num_microbatches, lay.mbs, cpu,
                                   sizes=sizes)
    return plan, cpu, prof, executor_step(plan, False)


def measured_steps(plan):
    """(the step as ``autoplan.execute.measure`` times it, ``train_step`` with the loss all-reduce overlapped) of
    one executor build of ``plan`` (DP wrapper included, AdamW), each on a fresh synthetic batch."""
    from autoplan.execute import apply
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.registry import model_vocab
    from autoplan.models.source import resolve_plan_model
    lay = plan.layout
    model = resolve_plan_model(plan.training.model_spec, plan.training.shape).build(0)
    par = apply.parallelize(model, plan)
    opt = torch.optim.AdamW(par.parameters(), lr=1e-3)
    i = [0]

    def batch():
        i[0] += 1
        tokens, labels = synthetic_batch(i[0] - 1, lay.global_batch, plan.training.seq_len, model_vocab(model), 0)
        return par.batch_slice(tokens), par.batch_slice(labels)

    def measure_step():
        par.step(*batch())
        par.optimizer_step(opt)
        par.after_optimizer_step()
        opt.zero_grad(set_to_none=True)

    def train_step():
        par.train_step(*batch(), opt)
    return measure_step, train_step
