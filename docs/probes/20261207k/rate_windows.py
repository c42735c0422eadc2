"""Exploratory (after part 3): where do readings above the profiled rate come from?  Each rank's matmul
window (start, end, its own rate) around a reading, first in a bare job, then with the plans of an in-turn job
built and stepped (as `measure_in_turn` does), then right after one timed round.

    torchrun --nproc-per-node 4 docs/probes/20261207k/rate_windows.py /work/exp/s27/shapes3/160x8/w0 [--pin]
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from autoplan.execute import measure
from autoplan.plan.plan import Plan


def cpu_now() -> int:
    """The CPU this process last ran on (/proc/self/stat, field 39)."""
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])


def reading(tag: str) -> None:
    dist.barrier()
    t0 = time.perf_counter()
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    done, cpus = 0, []
    while time.perf_counter() - t0 < 0.5:
        torch.mm(a, b)
        done += 1
        cpus.append(cpu_now())
    t1 = time.perf_counter()
    rate = 2.0 * 1024 ** 3 * done / (t1 - t0)
    share = sum(c == 0 for c in cpus) / max(1, len(cpus))   # of its matmuls, the share that ended on CPU 0 (none: stalled)
    mine = torch.tensor([t0, t1, rate, share], dtype=torch.float64)
    alls = [torch.zeros(4, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(alls, mine)
    if dist.get_rank() == 0:
        s0 = min(float(a[0]) for a in alls)
        cells = ", ".join(f"r{i} {float(a[0]) - s0:+.3f}..{float(a[1]) - s0:.3f} s {float(a[2]) / 1e9:.1f} "
                          f"cpu0 {float(a[3]):.0%}" for i, a in enumerate(alls))
        med = statistics.median(float(a[2]) for a in alls)
        print(f"{tag:28s} median {med / 1e9:5.1f} GFLOP/s | {cells}", flush=True)


def main() -> None:
    if "--pin" in sys.argv:             # local rank r on CPU r mod cores, for the whole job
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[int(os.environ["LOCAL_RANK"]) % len(cpus)]})
    measure._init()
    for k in range(3):
        reading(f"bare {k}")
    d = Path(sys.argv[1])
    plans = [Plan.load(p) for p in sorted(d.glob("plan-in-turn-*.json"))[:4]]
    trainers = [measure._trainer(p, 0) for p in plans]
    for k in range(2):
        reading(f"built {len(plans)} plans {k}")
    for i in range(2):
        for _, _, step in trainers:
            measure._timed_step(step, i, False, torch.device("cpu"))
        reading(f"after round {i}")
    for k in range(2):
        reading(f"later {k}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
