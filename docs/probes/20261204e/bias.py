"""Is there a place bias in timing plans in turn? The same plan twice (A, A') beside another (B), the order
fixed (A first every round) or rotated (autoplan.execute.measure.turn_order): A against A' should be 1.00.

    torchrun --nproc-per-node W bias.py PLAN_A PLAN_B [ROUNDS]
"""
import statistics, sys
import torch.distributed as dist
from autoplan.execute import measure as M
from autoplan.plan.plan import Plan
a, b = Plan.load(sys.argv[1]), Plan.load(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 24
use_cuda = M._init()
trainers = [M._trainer(p, 0) for p in (a, a, b)]
for name, order in (("fixed", lambda n, r: list(range(n))), ("rotated", M.turn_order)) * 2:
    times = [[] for _ in trainers]
    for i in range(2 + rounds):
        for k in order(len(trainers), i):
            par, _, step = trainers[k]
            _, dt = M._timed_step(step, i, use_cuda, par.device)
            if i >= 2:
                times[k].append(dt)
    med = [statistics.median(t) for t in times]
    if dist.get_rank() == 0:
        print(f"{name:8s} A {med[0]*1e3:7.1f} ms  A' {med[1]*1e3:7.1f} ms  B {med[2]*1e3:7.1f} ms  "
              f"A/A' {med[0]/med[1]:.3f}", flush=True)
dist.destroy_process_group()
