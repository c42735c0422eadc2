"""Exploratory: `autoplan.execute.measure` with local rank r pinned to CPU r mod cores (``--pin`` first).

    torchrun --nproc-per-node 4 docs/probes/20261207k/pinned_measure.py [--pin] --plan a.json b.json ... --steps 12 \
        --warmup 2 --out out.json
"""
import os
import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["--pin"]:
        sys.argv.pop(1)
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[int(os.environ["LOCAL_RANK"]) % len(cpus)]})
    from autoplan.execute.launch import exit_worker
    from autoplan.execute.measure import main
    exit_worker(main())
