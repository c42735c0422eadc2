"""Gradient accumulation: the executor's DP steps against the whole model with its gradients kept (the profile's
pairs) and cleared before each pair, in turn. torchrun --nproc-per-node 2 acc.py SHAPE PLAN..."""
import os, sys
sys.path.insert(0, "/work/main/benchmarks"); sys.path.insert(0, ".")
import torch, torch.distributed as dist
from in_turn import dp_step_cases, time_in_turn
from autoplan.execute.group_measure import GroupProfileConfig, _Job, _whole_model_case
from autoplan.plan.plan import Plan
shape, plans = sys.argv[1], sys.argv[2:]
dist.init_process_group("gloo"); cpu = torch.device("cpu")
cases = dp_step_cases(plans, optimizer_too=False)
job = _Job(GroupProfileConfig(spec=shape, mbs_list=(3, 6)), cpu)
for mbs in (3, 6):
    w = _whole_model_case(job, mbs)
    def kept(w=w):
        w.backward(w.forward())
    def cleared(w=w):
        w.module.zero_grad(set_to_none=True); w.backward(w.forward())
    cases[f"whole mbs{mbs} grads kept"] = kept
    cases[f"whole mbs{mbs} grads cleared"] = cleared
time_in_turn(cases, cpu, int(os.environ.get("ROUNDS", 6)), 32)
dist.destroy_process_group()
