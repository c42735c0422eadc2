"""``autoplan export``: a plan as the configuration of another training framework.

One module per framework, each a pure function from a :class:`~autoplan.plan.plan.Plan` to an
:class:`~autoplan.export.common.Export` (the file's text, the same as data, and warnings):

- :mod:`~autoplan.export.megatron`: the Megatron-LM command (torchrun ``pretrain_gpt.py`` and its arguments);
- :mod:`~autoplan.export.torchtitan`: the torchtitan 0.3 command (``--to torchtitan``), or the TOML job
  config of torchtitan <= 0.2 (``--to torchtitan-toml``);
- :mod:`~autoplan.export.deepspeed`: a DeepSpeed JSON config (its ``deepspeed`` launch line in ``launch``);
- :mod:`~autoplan.export.accelerate`: an Accelerate config (FSDP2, or the Megatron-LM plugin).

Each export carries the launch line with the plan's nodes and devices (``Export.launch``) and warns
when the plan was costed for another framework (``solve --framework``) than the one it is exported to.

What a framework cannot express is refused (:class:`~autoplan.export.common.ExportRefused`, one
line, exit code 2) or approximated with a warning that says what changes.
"""

from __future__ import annotations

from typing import Literal, get_args

from autoplan.errors import InputError
from autoplan.export.common import Export, ExportRefused
from autoplan.plan.plan import Plan

Framework = Literal["megatron", "torchtitan", "deepspeed", "accelerate"]
LegacyFormat = Literal["torchtitan-toml"]
"""older formats a framework's newest release no longer reads"""
Target = Literal[Framework, LegacyFormat]
"""what ``export --to`` writes"""
FRAMEWORKS: tuple[Framework, ...] = get_args(Framework)
LEGACY_FORMATS: tuple[LegacyFormat, ...] = get_args(LegacyFormat)


def export_plan(plan: Plan, framework: str, source: str = "") -> Export:
    """``plan`` as ``framework``'s configuration; ``source`` (the plan's path) goes in the header."""
    if framework == "megatron":
        from autoplan.export.megatron import export_megatron as fn
    elif framework == "torchtitan":
        from autoplan.export.torchtitan import export_torchtitan as fn
    elif framework == "torchtitan-toml":
        from autoplan.export.torchtitan import export_torchtitan_toml as fn
    elif framework == "deepspeed":
        from autoplan.export.deepspeed import export_deepspeed as fn
    elif framework == "accelerate":
        from autoplan.export.accelerate import export_accelerate as fn
    else:
        raise InputError(f"--to must be one of {', '.join(FRAMEWORKS + LEGACY_FORMATS)}, got {framework!r}")
    return fn(plan, source)


__all__ = ["Export", "ExportRefused", "FRAMEWORKS", "LEGACY_FORMATS", "Target", "export_plan"]
