"""Whole-model per-sample times at mbs 1,2,4 in turn, many rounds, every rank's time kept."""
import json, os, sys, time
import torch, torch.distributed as dist
from autoplan.execute.group_measure import GroupProfileConfig, _Job, _whole_model_case, _pairs
shape, out = sys.argv[1], sys.argv[2]
R = int(os.environ.get("ROUNDS", 30))
dist.init_process_group("gloo"); cpu = torch.device("cpu")
mbsl = (1, 2, 4)
job = _Job(GroupProfileConfig(spec=shape, mbs_list=mbsl), cpu)
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
if dist.get_rank() == 0:
    json.dump({"mbs": mbsl, "rows": rows}, open(out, "w"))
dist.destroy_process_group()
