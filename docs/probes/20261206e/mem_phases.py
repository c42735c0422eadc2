"""Where in a step is a layout's memory peak, and what is alive there? (CPU, gloo)

    torchrun --nproc-per-node N docs/probes/20261206e/mem_phases.py PLAN.json [PLAN.json ...]

For each plan: two untimed steps, then one under autoplan's LiveTensorTracker (what `validate` reports),
extended to keep, per phase (forward: no autograd node running; backward: one is; optimizer: inside
the optimizer step), the most bytes seen and the largest live storages made during the step at that moment, with the op that made each. Rank 0's figures,
beside the largest peak over ranks."""
import sys

import torch
import torch.distributed as dist

from autoplan.execute.measure import _init, _trainer
from autoplan.plan.plan import Plan
from autoplan.profile.memory import LiveTensorTracker, state_tensors


class PhaseTracker(LiveTensorTracker):
    def __init__(self, existing):
        self.phase, self.best, self.op, self.made_by = "fwd", {}, "entry", {}
        self.entry = set()
        super().__init__(existing)
        self.pinned_bytes = self.current_bytes
        self.entry = set(self._storages)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.op = str(func).replace("aten.", "").replace(".default", "")
        return super().__torch_dispatch__(func, types, args, kwargs)

    def _resize(self, ptr, n):
        if ptr not in self.made_by or (n and self._storages[ptr][0] == 0):
            self.made_by[ptr] = self.op
        super()._resize(ptr, n)
        ph = self.phase if self.phase == "opt" else ("bwd" if torch._C._current_autograd_node() is not None else "fwd")
        if self.current_bytes > self.best.get(ph, (0,))[0]:
            self.best[ph] = (self.current_bytes, self.op, sorted(((e[0], self.made_by.get(p, "?")) for p, e in self._storages.items()
                                                              if p not in self.entry), reverse=True)[:10])


_init()
for path in sys.argv[1:]:
    plan = Plan.load(path)
    par, opt, one_step = _trainer(plan, 0)
    for i in range(2):
        one_step(i)
    dist.barrier()
    inner = par.optimizer_step

    def opt_step(o, _inner=inner):
        tr.phase = "opt"
        _inner(o)
        tr.phase = "after"
    par.optimizer_step = opt_step
    with PhaseTracker(state_tensors(par.parameters(), opt)) as tr:
        one_step(2)
    par.optimizer_step = inner
    peaks = [None] * dist.get_world_size()
    dist.all_gather_object(peaks, tr.peak_bytes)
    if dist.get_rank() == 0:
        L = plan.layout
        print(f"{path}: dp{L.dp} tp{L.tp} pp{L.pp} zero{L.zero} mbs{L.mbs}x{L.num_microbatches} rc={L.recompute}: "
              f"peak {max(peaks) / 1e6:.2f} MB over ranks; rank 0 state at entry {tr.pinned_bytes / 1e6:.2f} MB")
        for ph, (b, op, top) in tr.best.items():
            print(f"   {ph:5s} {b / 1e6:7.2f} MB at {op}; largest new live: {', '.join(f'{x / 1e6:.2f} {o}' for x, o in top)}")
    del par, opt
dist.destroy_process_group()
