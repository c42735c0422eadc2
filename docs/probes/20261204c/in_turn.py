"""Shared by exab.py and dpab.py: time named closures in turn (2 rounds of warm-up), the slowest rank's time
each round, and print each one's median on rank 0."""
import statistics

import torch.distributed as dist
from autoplan.execute.group_measure import _agree_max, _timed


def time_in_turn(cases: dict, device, rounds: int, width: int = 26) -> None:
    times = {k: [] for k in cases}
    for r in range(2 + rounds):
        for name, fn in cases.items():
            t = _agree_max(_timed(fn, device))
            if r >= 2:
                times[name].append(t)
    if dist.get_rank() == 0:
        for name, v in times.items():
            print(f"{name:{width}s} median {statistics.median(v)*1e3:7.1f} ms (min {min(v)*1e3:.1f}, "
                  f"max {max(v)*1e3:.1f})", flush=True)
