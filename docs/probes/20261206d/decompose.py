"""Which part of a data-parallel training step makes two micro-batches cost more than one?

    torchrun --nproc-per-node 2 docs/probes/20261206d/decompose.py SHAPE.json GLOBAL_BATCH [ROUNDS]

One job, every case in turn each round (order rotated), each at B/W/2 x 2 and B/W x 1 on this rank's rows,
adding one part of the training step at a time to the profile's whole-model case:

    pairs        forward + backward per micro-batch, gradients accumulating, nothing else (the profile's case)
    +zero_grad   gradients set to None before the step (the first backward allocates them)
    +sgd         ... then an SGD step
    +adamw       ... an AdamW step instead
    ddp          DDP, gradient sync on the last micro-batch only (the executor), zero_grad, no optimizer
    ddp+adamw    ... with AdamW (the executor's step)

Slowest rank, median over rounds; x2 / x1 per case."""
import json, statistics as st, sys
import torch, torch.distributed as dist, torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from autoplan.execute.dp import set_gradient_sync
from autoplan.execute.group_measure import _agree_max, _timed
from autoplan.execute.measure import turn_order
from autoplan.models.registry import build_model_from_spec, sample_tokens

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
shape = json.load(open(sys.argv[1]))
per = int(sys.argv[2]) // world
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 16
tokens = sample_tokens(shape["vocab"], per, shape["seq_len"], rank)
targets = sample_tokens(shape["vocab"], per, shape["seq_len"], 100 + rank)
cpu = torch.device("cpu")


def case(zero_grad, opt_kind, ddp):
    model = build_model_from_spec(sys.argv[1], seed=0)
    runner = DistributedDataParallel(model) if ddp else model
    opt = {None: None, "sgd": lambda: torch.optim.SGD(model.parameters(), lr=1e-4),
           "adamw": lambda: torch.optim.AdamW(model.parameters(), lr=1e-4)}[opt_kind]
    opt = opt() if opt else None

    def step(m):
        if zero_grad:
            model.zero_grad(set_to_none=True)
        for i, (t, y) in enumerate(zip(tokens.chunk(m), targets.chunk(m))):
            if ddp:
                set_gradient_sync(runner, i == m - 1)
            (F.cross_entropy(runner(t).flatten(0, 1).float(), y.flatten()) / m).backward()
        if opt:
            opt.step()
    return step


names = ["pairs", "+zero_grad", "+sgd", "+adamw", "ddp", "ddp+adamw"]
specs = [(False, None, False), (True, None, False), (True, "sgd", False), (True, "adamw", False),
         (True, None, True), (True, "adamw", True)]
steps = [case(*s) for s in specs]
runs = [(k, m) for k in range(len(steps)) for m in (2, 1)]
got = {r: [] for r in runs}
for r in range(rounds + 2):
    order = turn_order(len(runs), r)
    for j in order:
        k, m = runs[j]
        dt = _agree_max(_timed(lambda: steps[k](m), cpu))
        if r >= 2:
            got[(k, m)].append(dt)
if rank == 0:
    for k, name in enumerate(names):
        a, b = st.median(got[(k, 2)]) * 1e3, st.median(got[(k, 1)]) * 1e3
        print(f"  {name:11s} mbs{per // 2}x2 {a:7.1f} ms   mbs{per}x1 {b:7.1f} ms   x2/x1 {a / b:.3f}")
    print(f"  (medians of {rounds} rounds, slowest rank)")
dist.destroy_process_group()
