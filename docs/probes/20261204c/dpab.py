"""The executor's DP step (DDP) against the whole model in the group job, in turn: torchrun ... dpab.py SHAPE PLAN..."""
import os, statistics, sys
sys.path.insert(0, "/work/main/benchmarks")
import torch, torch.distributed as dist
from autoplan.execute.group_measure import GroupProfileConfig, _agree_max, _Job, _timed, _whole_model_case
from autoplan.plan.plan import Plan
from in_turn import dp_step_cases, time_in_turn
shape, plans = sys.argv[1], sys.argv[2:]
dist.init_process_group("gloo"); cpu = torch.device("cpu")
cases = dp_step_cases(plans)
job = _Job(GroupProfileConfig(spec=shape, mbs_list=(1, 2, 4)), cpu)
for mbs in (1, 2, 4):
    w = _whole_model_case(job, mbs)
    def ref(w=w):
        w.backward(w.forward()); w.module.zero_grad(set_to_none=True)
    cases[f"whole model mbs{mbs} (grads cleared)"] = ref
time_in_turn(cases, cpu, int(os.environ.get("ROUNDS", 8)), 36)
dist.destroy_process_group()
