"""Probes 20261207i: what the launch scripts share. ``launch_worker`` (20261206h's phases_worker.py: a probe worker
under torchrun on one plan, what it wrote) and ``plan_with_stages`` (a stored plan with other stage sizes)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "20261206h"))
from phases_worker import launch_worker   # noqa: E402

__all__ = ["PHASES_WORKER", "launch_worker", "plan_with_stages"]

PHASES_WORKER = os.path.join(HERE, "..", "20261206h", "phases_worker.py")


def plan_with_stages(src: str, sizes: tuple[int, ...], dst: str) -> str:
    """Write to ``dst`` the plan at ``src`` with its layers (in order) regrouped into stages of ``sizes`` layers."""
    with open(src) as f:
        p = json.load(f)
    names = [n for stage in p["layout"]["stages"] for n in stage]
    bounds = [sum(sizes[:j]) for j in range(len(sizes) + 1)]
    p["layout"]["stages"] = [names[a:b] for a, b in zip(bounds, bounds[1:])]
    with open(dst, "w") as f:
        json.dump(p, f)
    return dst
