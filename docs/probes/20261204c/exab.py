"""The profile's pipeline run (planner's split) against the executor's step of the same plan, in turn."""
import os, statistics, sys
sys.path.insert(0, "/work/main/benchmarks")
import torch, torch.distributed as dist
from pipelined_dp_probe import executor_step
import autoplan.execute.pipeline_profile as pp_mod
from autoplan.execute.group_measure import GroupProfileConfig, _agree_max, _Job, _timed
from autoplan.plan.plan import Plan
shape, pf = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo"); cpu = torch.device("cpu")
plan = Plan.load(pf); lay = plan.layout
job = _Job(GroupProfileConfig(spec=shape, mbs_list=(lay.mbs,)), cpu)
sp = tuple(len(s) for s in lay.stages)
pp_mod.even_chunks = lambda units, chunks: sp
_, prof = pp_mod.pipeline_step(job, lay.pp, lay.vp, lay.schedule, lay.num_microbatches, lay.mbs, cpu)
plain = executor_step(plan, False)
wrapped = executor_step(plan, True)
cases = {"profile run": prof, "executor no opt": lambda: plain(False), "executor AdamW": lambda: plain(True),
         "executor wrapped AdamW": lambda: wrapped(True)}
times = {k: [] for k in cases}
R = int(os.environ.get("ROUNDS", 10))
for r in range(2 + R):
    for name, fn in cases.items():
        t = _agree_max(_timed(fn, cpu))
        if r >= 2: times[name].append(t)
if dist.get_rank() == 0:
    for name, v in times.items():
        print(f"{name:26s} median {statistics.median(v)*1e3:7.1f} ms (min {min(v)*1e3:.1f}, max {max(v)*1e3:.1f})")
dist.destroy_process_group()
