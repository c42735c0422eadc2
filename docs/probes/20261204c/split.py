"""Pipeline splits timed in turn in one job: does the planner's balanced split beat even chunks?
torchrun --nproc-per-node 3 split.py SHAPE MBS M SPLIT1 SPLIT2 ... (split: 2-2-3)"""
import sys, os, statistics as st, torch, torch.distributed as dist
import autoplan.execute.pipeline_profile as pp_mod
from autoplan.execute.group_measure import GroupProfileConfig, _Job, _timed
dist.init_process_group("gloo"); cpu = torch.device("cpu")
shape, mbs, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
splits = [tuple(int(x) for x in s.split("-")) for s in sys.argv[4:]]
job = _Job(GroupProfileConfig(spec=shape, mbs_list=(mbs,), pipelines=False), cpu)
steps = []
for sp in splits:
    pp_mod.even_chunks = lambda units, chunks, sp=sp: sp
    steps.append(pp_mod.pipeline_step(job, len(sp), 1, "1f1b", m, mbs, cpu)[1])
times = [[] for _ in splits]
for r in range(int(os.environ.get("ROUNDS", 12))):
    for i, s in enumerate(steps):
        t = _timed(s, cpu)
        v = torch.tensor([t]); dist.all_reduce(v, op=dist.ReduceOp.MAX)
        if r >= 2: times[i].append(v.item())
if dist.get_rank() == 0:
    for sp, t in zip(splits, times):
        print(sp, f"median {st.median(t):.4f}  min {min(t):.4f} max {max(t):.4f}", flush=True)
dist.destroy_process_group()
