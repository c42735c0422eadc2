"""Is the machine quiet? CPU time used by other programs while a measurement ran.

A timing taken while another program competes for the cores says little about the layout being
measured (on this project's 2-core reference machine a neighbour's test run made pipeline layouts
measure 2-5x slower). Measurements compare the CPU time every program used (``/proc/stat``) with
the CPU time of their own processes over the same window; the difference is the *foreign* load::

    foreign_cores = (busy CPU seconds of the machine - CPU seconds of the measured processes) / wall seconds

A sample whose foreign load exceeds ``FOREIGN_CORES_LIMIT`` is taken again (see
:mod:`autoplan.execute.group_profile` and :func:`autoplan.validate.measure_layout`). Where
``/proc/stat`` does not exist the check is skipped (``machine_busy_s`` returns None).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

FOREIGN_CORES_LIMIT = 0.25
"""a measurement is repeated when other programs used more than this many cores on average"""

_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_busy_s() -> float | None:
    """CPU seconds every program has spent not idle since boot (all cores), or None where unknown."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)        # idle + iowait
    steal = ticks[7] if len(ticks) > 7 else 0                     # taken by the hypervisor: not ours either
    return (sum(ticks[:8]) - idle - steal) / _TICKS_PER_S


def children_cpu_s() -> float:
    """CPU seconds of this process's children that have ended and been waited for (and theirs)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@dataclass
class ForeignLoad:
    """Measures the foreign load of one window: ``start()``, run, ``stop(own_cpu_s)``."""

    busy0: float | None = None
    wall0: float = 0.0

    def start(self) -> "ForeignLoad":
        self.busy0 = machine_busy_s()
        self.wall0 = time.perf_counter()
        return self

    def stop(self, own_cpu_s: float) -> float:
        """Average cores used by other programs since :meth:`start`, given the CPU seconds the
        measured processes used in that window (0.0 where /proc/stat is missing)."""
        busy1 = machine_busy_s()
        wall = time.perf_counter() - self.wall0
        if self.busy0 is None or busy1 is None or wall <= 0:
            return 0.0
        return max(0.0, (busy1 - self.busy0 - own_cpu_s) / wall)
