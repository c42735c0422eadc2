import os, sys
sys.path.insert(0, "/work/main/benchmarks"); sys.path.insert(0, "/work/main/docs/probes/20261204c")
import torch, torch.distributed as dist
from pipelined_dp_probe import executor_step
import autoplan.execute.pipeline_profile as pp_mod
from autoplan.execute.group_measure import GroupProfileConfig, _Job
from autoplan.plan.plan import Plan
from in_turn import time_in_turn
shape, pf = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo"); cpu = torch.device("cpu")
plan = Plan.load(pf); lay = plan.layout
job = _Job(GroupProfileConfig(spec=shape, mbs_list=(lay.mbs,)), cpu)
sp = tuple(len(s) for s in lay.stages)
pp_mod.even_chunks = lambda units, chunks: sp
_, prof = pp_mod.pipeline_step(job, lay.pp, lay.vp, lay.schedule, lay.num_microbatches, lay.mbs, cpu)
def prof_ar():
    prof(); t = torch.zeros((), dtype=torch.float64); dist.all_reduce(t)
plain = executor_step(plan, False)
cases = {"profile run": prof, "profile run + allreduce": prof_ar, "executor no opt": lambda: plain(False),
         "executor AdamW": lambda: plain(True)}
time_in_turn(cases, cpu, int(os.environ.get("ROUNDS", 10)), 26)
dist.destroy_process_group()
