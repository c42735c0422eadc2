"""Executor steps (with DP wrapper, AdamW) of several plans in turn in one job, beside the profile's pipeline run of the first pipeline plan."""
import os, sys
sys.path.insert(0, "/work/main/benchmarks"); sys.path.insert(0, "/work/main/docs/probes/20261204c")
import torch, torch.distributed as dist
from pipelined_dp_probe import executor_step
from autoplan.plan.plan import Plan
from in_turn import time_in_turn
dist.init_process_group("gloo"); cpu = torch.device("cpu")
cases = {}
for pf in sys.argv[1:]:
    plan = Plan.load(pf); s = executor_step(plan, True)
    cases[plan.layout.short()[:40] + " AdamW"] = (lambda s: lambda: s(True))(s)
    if os.environ.get("NOOPT"): cases[plan.layout.short()[:40] + " no opt"] = (lambda s: lambda: s(False))(s)
time_in_turn(cases, cpu, int(os.environ.get("ROUNDS", 10)), 50)
dist.destroy_process_group()
