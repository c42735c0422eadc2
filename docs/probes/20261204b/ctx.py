"""The profile's cases first (measure_in_groups, no pipelines), then whole-model rounds as wm_noise.py."""
import json, os, sys, time
import torch, torch.distributed as dist
from autoplan.execute.group_measure import GroupProfileConfig, _Job, _whole_model_case, _pairs, measure_in_groups, WHOLE_MODEL
shape, out = sys.argv[1], sys.argv[2]
R = int(os.environ.get("ROUNDS", 14)); FIRST = os.environ.get("FIRST") == "1"
dist.init_process_group("gloo"); cpu = torch.device("cpu")
mbsl = (1, 2, 4)
cfg = GroupProfileConfig(spec=shape, mbs_list=mbsl, pipelines=False)
def rounds():
    job = _Job(cfg, cpu)
    first = _whole_model_case(job, mbsl[0]); cases = [first] + [_whole_model_case(job, m, first.module) for m in mbsl[1:]]
    for c in cases:
        for _ in range(2):
            dist.barrier(); _pairs(c, cpu, 1)
    rows = []
    for r in range(R):
        row = []
        for c, m in zip(cases, mbsl):
            dist.barrier(); f, b = _pairs(c, cpu, 1)
            t = torch.tensor([f + b], dtype=torch.float64); g = [torch.zeros(1, dtype=torch.float64) for _ in range(dist.get_world_size())]
            dist.all_gather(g, t); row.append([float(x) / m for x in g])
        rows.append(row)
    return rows
pre = rounds() if FIRST else None
t0 = time.time()
res, _ = measure_in_groups(cfg, cpu)
wm = {g.mbs: (g.forward_s + g.backward_s) / g.mbs for g in res[WHOLE_MODEL]}
t1 = time.time()
post = rounds()
if dist.get_rank() == 0:
    json.dump({"mbs": mbsl, "rows": post, "pre": pre, "profile_whole": wm, "profile_s": t1 - t0}, open(out, "w"))
    print("profile whole per-sample ms", {k: round(v * 1e3, 1) for k, v in wm.items()}, "r4/2 %.3f" % (wm[4] / wm[2]), "profile %.0f s" % (t1 - t0))
dist.destroy_process_group()
