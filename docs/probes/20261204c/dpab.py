"""The executor's DP step (DDP) against the whole model in the group job, in turn: torchrun ... dpab.py SHAPE PLAN..."""
import os, statistics, sys
sys.path.insert(0, "/work/main/benchmarks")
import torch, torch.distributed as dist
from pipelined_dp_probe import executor_step
from autoplan.execute.group_measure import GroupProfileConfig, _agree_max, _Job, _timed, _whole_model_case
from autoplan.plan.plan import Plan
from in_turn import time_in_turn
shape, plans = sys.argv[1], sys.argv[2:]
dist.init_process_group("gloo"); cpu = torch.device("cpu")
cases = {}
for pf in plans:
    plan = Plan.load(pf); lay = plan.layout
    step = executor_step(plan, True)
    tag = f"dp{lay.dp} mbs{lay.mbs}x{lay.num_microbatches}"
    cases[f"{tag} executor no opt"] = (lambda s: (lambda: s(False)))(step)
    cases[f"{tag} executor AdamW"] = (lambda s: (lambda: s(True)))(step)
job = _Job(GroupProfileConfig(spec=shape, mbs_list=(1, 2, 4)), cpu)
for mbs in (1, 2, 4):
    w = _whole_model_case(job, mbs)
    def ref(w=w):
        w.backward(w.forward()); w.module.zero_grad(set_to_none=True)
    cases[f"whole model mbs{mbs} (grads cleared)"] = ref
time_in_turn(cases, cpu, int(os.environ.get("ROUNDS", 8)), 36)
dist.destroy_process_group()
