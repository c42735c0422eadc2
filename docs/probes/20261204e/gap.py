"""The profile's pipeline run against the executor's step of the same plan, in turn, in one job."""
import os, sys
sys.path.insert(0, "/work/main/benchmarks"); sys.path.insert(0, "/work/main/docs/probes/20261204c")
import torch, torch.distributed as dist
from pipelined_dp_probe import executor_step
import autoplan.execute.pipeline_profile as pp_mod
from autoplan.execute import apply
from autoplan.execute.group_measure import GroupProfileConfig, _Job
from autoplan.execute.data import synthetic_batch
from autoplan.models.registry import model_vocab
from autoplan.models.source import resolve_plan_model
from autoplan.plan.plan import Plan
from in_turn import time_in_turn
shape, pf = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo"); cpu = torch.device("cpu")
plan = Plan.load(pf); lay = plan.layout
job = _Job(GroupProfileConfig(spec=shape, mbs_list=(lay.mbs,)), cpu)
sp = tuple(len(s) for s in lay.stages)
pp_mod.even_chunks = lambda units, chunks: sp
_, prof = pp_mod.pipeline_step(job, lay.pp, lay.vp, lay.schedule, lay.num_microbatches, lay.mbs, cpu)
plain = executor_step(plan, False)
model = resolve_plan_model(plan.training.model_spec, plan.training.shape).build(0)
par = apply.parallelize(model, plan)
opt = torch.optim.AdamW(par.parameters(), lr=1e-3)
i = [0]
def measure_step():       # what autoplan.execute.measure times
    tokens, labels = synthetic_batch(i[0], lay.global_batch, plan.training.seq_len, model_vocab(model), 0); i[0] += 1
    par.step(par.batch_slice(tokens), par.batch_slice(labels)); par.optimizer_step(opt); par.after_optimizer_step()
    opt.zero_grad(set_to_none=True)
def train_step():
    tokens, labels = synthetic_batch(i[0], lay.global_batch, plan.training.seq_len, model_vocab(model), 0); i[0] += 1
    par.train_step(par.batch_slice(tokens), par.batch_slice(labels), opt)
def opt_only():
    par.optimizer_step(opt)
cases = {"profile run": prof, "executor no opt": lambda: plain(False), "executor AdamW": lambda: plain(True),
         "measure.py step": measure_step, "train_step (async loss)": train_step}
time_in_turn(cases, cpu, int(os.environ.get("ROUNDS", 10)), 26)
dist.destroy_process_group()
