"""Hand layouts as constraints on the same planner, so they are costed by the same model.

A preset fixes some layout fields; the solver chooses the rest (and the stages). ``--layout``
fields given beside a preset override it.
"""

from __future__ import annotations

from typing import Literal

from autoplan.errors import InputError
from autoplan.profile.formats import ClusterProfile, ModelProfile

Preset = Literal["ddp", "zero1", "zero2", "zero3", "megatron"]

PRESET_HELP: dict[Preset, str] = {
    "ddp": "pure data parallel: every device holds the whole model and whole sequences (tp=1, pp=1, cp=1, zero=0)",
    "zero1": "data parallel with the optimizer state sharded (tp=1, pp=1, zero=1)",
    "zero2": "data parallel with optimizer state and gradients sharded (tp=1, pp=1, zero=2)",
    "zero3": "fully sharded data parallel, FSDP / ZeRO-3 (tp=1, pp=1, zero=3)",
    "megatron": "Megatron-LM style: tensor parallel over a whole node with sequence parallel, pipeline "
                "parallel across nodes, data parallel over the rest (tp = largest degree <= GPUs per node)",
}


DATA_PARALLEL_FIELDS: dict[str, dict] = {
    "ddp": {"tp": 1, "pp": 1, "cp": 1, "zero": 0},     # pure: cp > 1 would split the sequence
    "zero1": {"tp": 1, "pp": 1, "zero": 1},
    "zero2": {"tp": 1, "pp": 1, "zero": 2},
    "zero3": {"tp": 1, "pp": 1, "zero": 3},
}
"""the layout fields the data-parallel presets fix (the explanation's DDP and ZeRO-3 families too)"""


def preset_constraints(name: str, profile: ModelProfile, cluster: ClusterProfile) -> dict:
    """The layout fields a preset fixes for this model and cluster."""
    if name in DATA_PARALLEL_FIELDS:
        return dict(DATA_PARALLEL_FIELDS[name])
    if name == "megatron":
        from autoplan.plan.search import allowed_tp     # the search's imports (the ILP solvers) only when used
        tps = allowed_tp(profile) or {1}
        tp = max(t for t in tps if t <= cluster.devices_per_node and cluster.world_size % t == 0)
        return {"tp": tp, "sp": 1 if tp > 1 else 0}
    raise InputError(f"unknown preset {name!r} (known: {', '.join(PRESET_HELP)})")


def with_preset(preset: str | None, given: dict, profile: ModelProfile, cluster: ClusterProfile) -> dict:
    """The layout fields that ``preset`` (if any) and ``given`` (``--layout``) fix; ``given``'s win."""
    return {**(preset_constraints(preset, profile, cluster) if preset else {}), **given}
