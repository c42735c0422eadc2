import os, statistics, sys
sys.path.insert(0, "/work/main/benchmarks")
import torch, torch.distributed as dist
from pipelined_dp_probe import executor_step
from autoplan.execute.group_measure import GroupProfileConfig, _agree_max, _Job, _timed, _whole_model_case
from autoplan.execute.pipeline_profile import pipeline_step
from autoplan.plan.plan import Plan
shape = sys.argv[1]; plans = sys.argv[2:]
dist.init_process_group("gloo"); cpu = torch.device("cpu")
cases = {}
for pf in plans:
    plan = Plan.load(pf); lay = plan.layout
    job = _Job(GroupProfileConfig(spec=shape, mbs_list=(lay.mbs,)), cpu)
    _, prof = pipeline_step(job, lay.pp, lay.vp, lay.schedule, lay.num_microbatches, lay.mbs, cpu)
    plain = executor_step(plan, False)
    tag = f"{lay.schedule} vp{lay.vp}"
    cases[f"{tag} profile run"] = prof
    cases[f"{tag} executor no opt"] = (lambda pl: (lambda: pl(False)))(plain)
    cases[f"{tag} executor AdamW"] = (lambda pl: (lambda: pl(True)))(plain)
whole = _whole_model_case(job, 4)
def ref():
    whole.backward(whole.forward()); whole.module.zero_grad(set_to_none=True)
times = {k: [] for k in cases}; times_ref = {k: [] for k in cases if "profile" in k}
R = int(os.environ.get("ROUNDS", 6))
for r in range(2 + R):
    for name, fn in cases.items():
        t = _agree_max(_timed(fn, cpu))
        if r >= 2: times[name].append(t)
    for name in times_ref:      # as the profile does: a whole-model reference before the step
        _timed(ref, cpu)
        t = _agree_max(_timed(cases[name], cpu))
        if r >= 2: times_ref[name].append(t)
if dist.get_rank() == 0:
    for name, v in times.items():
        print(f"{name:34s} median {statistics.median(v)*1e3:7.1f} ms (min {min(v)*1e3:.1f}, max {max(v)*1e3:.1f})")
    for name, v in times_ref.items():
        print(f"{name + ' after ref':34s} median {statistics.median(v)*1e3:7.1f} ms (min {min(v)*1e3:.1f}, max {max(v)*1e3:.1f})")
dist.destroy_process_group()
