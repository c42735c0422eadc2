"""The stored fidelity workloads (``benchmarks/fidelity.py``'s ``runs.json``) read back as :class:`autoplan.validate.Run`
lists, for this folder's exploratory scripts: each workload once, however many copies of it lie about."""
from __future__ import annotations

import glob
import json
from dataclasses import dataclass

from autoplan.plan.plan import Layout, Prediction
from autoplan.validate import Measured, Run

DEFAULT_GLOBS = ("/work/exp/**/runs.json", "docs/probes/**/*runs*.json")
"""this VM's session data first, then the copies kept under docs/probes (a copy of a workload already read is skipped)"""


@dataclass
class Stored:
    path: str
    runs: list[Run]          # each layout measured once (runs[0]: the model's choice)
    confirmed: list[Run]     # the first in-turn job (fidelity.py's judge), [] where there was none
    judged: list[Run]        # the second in-turn job, [] where there was none


def _run(d: dict) -> Run:
    m = d.get("measured")
    return Run(Layout.from_dict(d["layout"]), Prediction.from_dict(d["predicted"]),
               None if m is None else Measured.from_dict(m))


def stored_files(patterns: list[str] | tuple[str, ...] = DEFAULT_GLOBS):
    """(path, the file's JSON) of every stored workload the glob ``patterns`` match, in the order of the patterns
    (each sorted), a workload whose runs were already read skipped."""
    seen = set()
    for pat in patterns:
        for p in sorted(glob.glob(pat, recursive=True)):
            try:
                d = json.load(open(p))
            except (OSError, ValueError):
                continue
            if not isinstance(d, dict) or "runs" not in d:
                continue
            sig = json.dumps(d["runs"], sort_keys=True)
            if sig in seen:
                continue
            seen.add(sig)
            yield p, d


def stored_workloads(patterns: list[str] | tuple[str, ...] = DEFAULT_GLOBS) -> list[Stored]:
    """Every workload in the files the glob ``patterns`` match, in the order of the patterns (each sorted)."""
    return [Stored(p, [_run(r) for r in d["runs"]], [_run(r) for r in d.get("confirmed") or []],
                   [_run(r) for r in d.get("judged") or []]) for p, d in stored_files(patterns)]


def in_turn(runs: list[Run]) -> list[Run]:
    """the runs timed in turn (``Measured.in_turn_s``)"""
    return [r for r in runs if r.measured is not None and r.measured.in_turn_s]


def family(layout: Layout) -> str:
    """pp (pp > 1), tp (tp > 1, pp 1), dp (pp 1, tp 1; any ZeRO stage)"""
    return "pp" if layout.pp > 1 else "tp" if layout.tp > 1 else "dp"
