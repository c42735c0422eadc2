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


def dp_step_cases(plan_files: list[str], optimizer_too: bool = True) -> dict:
    """The executor's step of each plan (with its DP wrapper) as named closures: with AdamW, and without
    the optimizer too where ``optimizer_too``. Needs ``benchmarks/`` on the path."""
    from pipelined_dp_probe import executor_step

    from autoplan.plan.plan import Plan
    cases = {}
    for pf in plan_files:
        lay = (plan := Plan.load(pf)).layout
        step = executor_step(plan, True)
        tag = f"dp{lay.dp} mbs{lay.mbs}x{lay.num_microbatches}"
        if optimizer_too:
            cases[f"{tag} executor no opt"] = (lambda s: (lambda: s(False)))(step)
        cases[f"{tag} executor AdamW"] = (lambda s: (lambda: s(True)))(step)
    return cases
