"""Solve wall time and optimality gap from 8 to 3072 GPUs (catalogue DGX A100 80GB cluster).

    python benchmarks/solve_scaling.py

Targets on a 2-core machine: 175B on 1024 GPUs <= 10 s, 1T on 3072 <= 30 s, gap <= 1%.
Wall time is the search alone (outer enumeration + every placement ILP), then the whole
`solve` including the per-family explanations (which run further constrained searches).
"""

from __future__ import annotations

import time

from autoplan.plan.api import make_problem, solve_problem
from autoplan.plan.search import SearchOptions, search

CASES = [  # model, catalogue cluster (8 GPUs per node), global batch (sequences), target search wall (s)
    ("gpt3-1.3b", "dgx-a100-80gb:1", 512, None),
    ("gpt3-13b", "dgx-a100-80gb:8", 1024, None),
    ("gpt3-175b", "dgx-a100-80gb:128", 1536, 10.0),
    ("gpt-1t", "dgx-a100-80gb:384", 3072, 30.0),
]


def main() -> None:
    print(f"{'model':<10} {'gpus':>5} {'batch':>6} {'layouts':>8} {'pruned':>7} {'ILPs':>5} {'search_s':>9} "
          f"{'solve_s':>8} {'gap':>7} {'step_s':>8}  chosen layout  [target]")
    for model, cluster, batch, target in CASES:
        pb = make_problem(model, cluster, batch)
        t0 = time.perf_counter()
        res = search(pb.profile, pb.cluster, pb.train, SearchOptions())
        search_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        plan = solve_problem(pb)
        solve_s = time.perf_counter() - t0
        s = res.solver
        ok = "" if target is None else f"[<= {target:.0f} s: {'met' if search_s <= target and s.gap <= 0.01 else 'MISSED'}]"
        print(f"{model:<10} {pb.cluster.world_size:>5} {batch:>6} {s.layouts_considered:>8} {s.layouts_pruned:>7} "
              f"{s.ilps_solved:>5} {search_s:>9.2f} {solve_s:>8.2f} {s.gap * 100:>6.2f}% "
              f"{plan.predicted.step_time_s:>8.2f}  {plan.layout.short()}  {ok}", flush=True)


if __name__ == "__main__":
    main()
