"""In one gloo job: the profile's pipeline step (schedule only, as pipeline_profile.pipeline_step) against the
executor's step (par.step, and par.step + AdamW, as validate's measure._trainer), the same layout, in turn,
each behind a barrier, slowest rank, median of ROUNDS."""
import json, os, statistics, sys, time
import torch, torch.distributed as dist
from autoplan.execute.apply import parallelize, token_cross_entropy
from autoplan.execute.data import synthetic_batch
from autoplan.execute.pp import build_schedule, split_model, stage_ids
from autoplan.models.transformer import ModelShape, build_model
from autoplan.plan.plan import Layout

wl, key = sys.argv[1], sys.argv[2]          # a stored workload and the index of a pp layout in runs.json
ROUNDS = int(os.environ.get("ROUNDS", "12"))
d = json.load(open(f"{wl}/runs.json"))
shape = ModelShape.from_dict(d["workload"]["shape"])
lay = Layout.from_dict(d["runs"][int(key)]["layout"])
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = build_model(shape, seed=0)
# (a) the profile's way
pp, vp, m = lay.pp, lay.vp, lay.num_microbatches
ids = stage_ids(rank % pp, pp=pp, vp=vp)
chunks = [c.train() for c in split_model(model, lay.stages, ids)]
sched = build_schedule(chunks, ids, num_stages=pp * vp, schedule=lay.schedule, n_microbatches=m,
                       loss_fn=token_cross_entropy, device=torch.device("cpu"), group=dist.group.WORLD)
tokens, labels = synthetic_batch(0, lay.global_batch, shape.seq_len, shape.vocab, 0)
first, last = 0 in ids, pp * vp - 1 in ids
def prof_step(i):
    sched.step(*((tokens,) if first else ()), target=labels if last else None, losses=[], return_outputs=False)
    for c in chunks:
        for p in c.parameters():
            p.grad = None
# (b), (c) the executor's way
par = parallelize(build_model(shape, seed=0), lay)
opt = torch.optim.AdamW(par.parameters(), lr=1e-3)
def exec_step(i):
    t, y = synthetic_batch(i, lay.global_batch, shape.seq_len, shape.vocab, 0)
    par.step(par.batch_slice(t), par.batch_slice(y)); par.zero_grad()
def exec_opt(i):
    t, y = synthetic_batch(i, lay.global_batch, shape.seq_len, shape.vocab, 0)
    par.step(par.batch_slice(t), par.batch_slice(y)); par.optimizer_step(opt); par.after_optimizer_step()
    opt.zero_grad(set_to_none=True)
steps = {"profile's schedule step": prof_step, "executor par.step": exec_step, "executor + AdamW": exec_opt}
times = {k: [] for k in steps}
names = list(steps)
for r in range(2 + ROUNDS):
    for k in [names[(r + j) % len(names)] for j in range(len(names))]:
        dist.barrier(); t0 = time.perf_counter(); steps[k](r)
        dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        if r >= 2:
            times[k].append(float(dt))
if rank == 0:
    print(lay.short(), "stages", [len(s) for s in lay.stages])
    for k, v in times.items():
        print(f"  {k:26s} median {statistics.median(v)*1e3:7.1f} ms  ({min(v)*1e3:.1f}-{max(v)*1e3:.1f})")
dist.destroy_process_group()
