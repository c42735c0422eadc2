"""Per-sample cost at mbs 2 and 4: the profile's whole-model pair (grads kept / cleared) against the pipeline step."""
import os, statistics, sys
import torch, torch.distributed as dist
from autoplan.execute.group_measure import GroupProfileConfig, _agree_max, _Job, _timed, _whole_model_case
from autoplan.execute.pipeline_profile import pipeline_step
shape = sys.argv[1]
dist.init_process_group("gloo"); cpu = torch.device("cpu")
job = _Job(GroupProfileConfig(spec=shape, mbs_list=(2, 4)), cpu)
cases = {}
for mbs in (2, 4):
    w = _whole_model_case(job, mbs)
    def kept(w=w):
        w.backward(w.forward())
    def cleared(w=w):
        for p in w.module.parameters(): p.grad = None
        w.backward(w.forward())
    cases[f"whole mbs{mbs} grads kept"] = (kept, mbs)
    cases[f"whole mbs{mbs} grads cleared"] = (cleared, mbs)
    _, st = pipeline_step(job, 4, 1, "1f1b", 16 // mbs, mbs, cpu)
    cases[f"pp4 1f1b mbs{mbs}x{16 // mbs} step"] = (st, 16)
    _, st2 = pipeline_step(job, 4, 2, "interleaved", 16 // mbs, mbs, cpu)
    cases[f"pp4 vp2 mbs{mbs}x{16 // mbs} step"] = (st2, 16)
times = {k: [] for k in cases}
R = int(os.environ.get("ROUNDS", 8))
for r in range(2 + R):
    for name, (fn, n) in cases.items():
        t = _agree_max(_timed(fn, cpu))
        if r >= 2: times[name].append(t / n)
if dist.get_rank() == 0:
    for name, v in times.items():
        print(f"{name:32s} per sample median {statistics.median(v)*1e3:7.2f} ms (min {min(v)*1e3:.2f}, max {max(v)*1e3:.2f})")
dist.destroy_process_group()
