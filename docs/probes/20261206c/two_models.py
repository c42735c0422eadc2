"""In one job: two models (one per micro-batching) stepping in turn, against one model at both micro-batchings.

    torchrun --nproc-per-node 2 docs/probes/20261206c/two_models.py SHAPE.json GLOBAL_BATCH [ROUNDS]

Each round times, in turn, one DDP + AdamW training step (zero_grad, per micro-batch the gradient-sync switch,
loss / m, backward; the optimizer step) of: model A at B/W/2 x 2, model B at B/W x 1 (the two models of an
in-turn judge), then model C at B/W/2 x 2 and at B/W x 1 (one model, as benchmarks/microbatch_probe.py).
Slowest rank, median over rounds."""
import json, statistics as st, sys
import torch, torch.distributed as dist, torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from autoplan.execute.dp import set_gradient_sync
from autoplan.execute.group_measure import _agree_max, _timed
from autoplan.models.registry import build_model_from_spec, sample_tokens

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
shape = json.load(open(sys.argv[1]))
per = int(sys.argv[2]) // world
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
tokens = sample_tokens(shape["vocab"], per, shape["seq_len"], rank)
targets = sample_tokens(shape["vocab"], per, shape["seq_len"], 100 + rank)


def trainer():
    model = build_model_from_spec(sys.argv[1], seed=0)
    ddp = DistributedDataParallel(model)
    return ddp, torch.optim.AdamW(model.parameters(), lr=1e-4)


def step(ddp, opt, m):
    opt.zero_grad(set_to_none=True)
    for i, (t, y) in enumerate(zip(tokens.chunk(m), targets.chunk(m))):
        set_gradient_sync(ddp, i == m - 1)
        (F.cross_entropy(ddp(t).flatten(0, 1).float(), y.flatten()) / m).backward()
    opt.step()


A, B, C = trainer(), trainer(), trainer()
cases = [("two models: A", A, 2), ("two models: B", B, 1), ("one model: C", C, 2), ("one model: C", C, 1)]
got = [[] for _ in cases]
for r in range(rounds + 2):
    for k, (_, (ddp, opt), m) in enumerate(cases):
        dt = _agree_max(_timed(lambda: step(ddp, opt, m), torch.device("cpu")))
        if r >= 2:
            got[k].append(dt)
if rank == 0:
    med = [st.median(g) * 1e3 for g in got]
    for (name, _, m), v in zip(cases, med):
        print(f"  {name:14s} mbs{per // m}x{m}: {v:7.1f} ms")
    print(f"  x2 / x1: two models {med[0] / med[1]:.3f}, one model {med[2] / med[3]:.3f} (medians of {rounds} rounds)")
dist.destroy_process_group()
