"""What is alive at a ZeRO-3 step's memory peak on CPU (gloo), as the executor's measurement counts it?

    torchrun --nproc-per-node 4 docs/probes/20261206d/zero3_peak.py PLAN.json

Two untimed steps, then one step under autoplan's LiveTensorTracker (what `validate` reports), extended to
record at each new peak the op being dispatched and the sizes of the largest live storages. Rank by rank."""
import sys

import torch.distributed as dist

from autoplan.execute.measure import _init, _trainer
from autoplan.plan.plan import Plan
from autoplan.profile.memory import LiveTensorTracker, state_tensors


class PeakTracker(LiveTensorTracker):
    def __init__(self, existing):
        self.op, self.at_peak = "", None
        super().__init__(existing)
        self.pinned_bytes = self.current_bytes

    def _resize(self, ptr, n):
        before = self.peak_bytes
        super()._resize(ptr, n)
        if self.peak_bytes > before:
            self.at_peak = (self.op, sorted((e[0] for e in self._storages.values()), reverse=True)[:10])

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.op = str(func)
        return super().__torch_dispatch__(func, types, args, kwargs)


_init()
plan = Plan.load(sys.argv[1])
par, opt, one_step = _trainer(plan, 0)
for i in range(2):
    one_step(i)
dist.barrier()
with PeakTracker(state_tensors(par.parameters(), opt)) as tr:
    one_step(2)
rows = [None] * dist.get_world_size()
dist.all_gather_object(rows, (tr.peak_bytes, tr.pinned_bytes, tr.at_peak))
if dist.get_rank() == 0:
    for r, (peak, pinned, (op, top)) in enumerate(rows):
        print(f"rank {r}: peak {peak / 1e6:.1f} MB (state pinned at start {pinned / 1e6:.1f} MB), at {op}; "
              f"largest live: {', '.join(f'{b / 1e6:.2f}' for b in top)} MB")
dist.destroy_process_group()
