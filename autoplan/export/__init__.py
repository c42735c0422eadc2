"""``autoplan export``: a plan as the configuration of another training framework.

One module per framework, each a pure function from a :class:`~autoplan.plan.plan.Plan` to an
:class:`~autoplan.export.common.Export` (the file's text, the same as data, and warnings):

- :mod:`~autoplan.export.megatron`: Megatron-LM command-line arguments;
- :mod:`~autoplan.export.torchtitan`: a torchtitan TOML job config;
- :mod:`~autoplan.export.deepspeed`: a DeepSpeed JSON config;
- :mod:`~autoplan.export.accelerate`: an Accelerate config (FSDP2, or the Megatron-LM plugin).

What a framework cannot express is refused (:class:`~autoplan.export.common.ExportRefused`, one
line, exit code 2) or approximated with a warning that says what changes.
"""

from __future__ import annotations

from autoplan.errors import InputError
from autoplan.export.common import Export, ExportRefused
from autoplan.plan.plan import Plan

FRAMEWORKS = ("megatron", "torchtitan", "deepspeed", "accelerate")


def export_plan(plan: Plan, framework: str, source: str = "") -> Export:
    """``plan`` as ``framework``'s configuration; ``source`` (the plan's path) goes in the header."""
    if framework == "megatron":
        from autoplan.export.megatron import export_megatron as fn
    elif framework == "torchtitan":
        from autoplan.export.torchtitan import export_torchtitan as fn
    elif framework == "deepspeed":
        from autoplan.export.deepspeed import export_deepspeed as fn
    elif framework == "accelerate":
        from autoplan.export.accelerate import export_accelerate as fn
    else:
        raise InputError(f"--to must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    return fn(plan, source)


__all__ = ["Export", "ExportRefused", "FRAMEWORKS", "export_plan"]
