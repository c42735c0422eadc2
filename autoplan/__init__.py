"""autoplan: measure, choose and apply the hybrid parallel layout for training a PyTorch model.

Python API (same meaning as the CLI)::

    plan = autoplan.solve(model="gpt-tiny", cluster="cluster.json", global_batch=16)
    pred = autoplan.estimate(model=..., cluster=..., global_batch=16, layout="dp=2,tp=2,pp=1,mbs=4")
    model = autoplan.parallelize(model, plan)        # inside torchrun
    plan = autoplan.Plan.load("plan.json")
"""

from __future__ import annotations

from autoplan.errors import AutoplanError
from autoplan.plan.plan import Layout, Plan

__all__ = ["AutoplanError", "Layout", "Plan", "solve", "estimate", "parallelize"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy: importing autoplan must not import torch.distributed or pulp.
    if name in ("solve", "estimate"):
        from autoplan.plan import api
        return getattr(api, name)
    if name == "parallelize":
        from autoplan.execute.apply import parallelize
        return parallelize
    raise AttributeError(name)
