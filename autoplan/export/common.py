"""What every exporter needs: the export record, refusals, and the plan read as a framework sees it.

Training frameworks build their own transformer (Megatron-LM's GPT, torchtitan's Llama, ...) and
place it on pipeline stages by layer counts, so an exporter reads the plan's stages as counts of
``embed`` / ``block.i`` / ``head`` per stage (:func:`chain_stages`) and refuses a plan whose units
are not such a chain. What a framework cannot express is refused (:class:`ExportRefused`) or
approximated with a warning that says what changes (``Export.warnings``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from autoplan.profile.formats import is_fp8
from autoplan.errors import InputError
from autoplan.jsonio import write_text_atomic
from autoplan.models.shapes import ModelShape
from autoplan.plan.groups import data_parallel_wrapper
from autoplan.plan.plan import Layout, Plan

BLOCK = re.compile(r"^block\.(\d+)$")
NORM_EPS = 1e-5
"""autoplan's reference transformer: RMSNorm with this epsilon (:mod:`autoplan.models.transformer`)"""


class ExportRefused(InputError):
    """The plan uses something the target framework cannot express, and no approximation is safe."""


@dataclass
class Export:
    framework: str
    format: str
    """``sh`` (a command line: Megatron-LM, torchtitan 0.3), ``toml``, ``json`` or ``yaml``"""
    text: str
    """the file's content"""
    config: dict
    """what ``text`` encodes, as data"""
    warnings: list[str] = field(default_factory=list)
    """what the framework cannot express exactly, and what changes because of it"""
    launch: str = ""
    """the command that starts the framework on the plan's nodes and devices (also in ``text``)"""

    def to_dict(self) -> dict:
        return {"framework": self.framework, "format": self.format, "config": self.config,
                "warnings": self.warnings, "launch": self.launch, "text": self.text}

    def save(self, path: str | os.PathLike) -> None:
        """Write ``text`` to ``path`` via a temporary file and a rename (never half-written)."""
        write_text_atomic(path, self.text)


@dataclass(frozen=True)
class StageUnits:
    """One pipeline chunk as a framework sees it."""

    embed: bool
    blocks: tuple[int, ...]
    """block indices, consecutive"""
    head: bool

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)


def chain_stages(plan: Plan, framework: str) -> list[StageUnits]:
    """The plan's chunks as ``embed? block.i..block.j head?``, in order; refuses anything else
    (a user model's own units, a DAG placement that is not a chain of consecutive blocks)."""
    out = []
    expect = 0
    names = [n for st in plan.layout.stages for n in st]
    for j, st in enumerate(plan.layout.stages):
        embed = head = False
        blocks = []
        for n in st:
            m = BLOCK.match(n)
            if n == "embed" and expect == 0 and not blocks and j == 0:
                embed = True
            elif m and int(m.group(1)) == expect:
                blocks.append(expect)
                expect += 1
            elif n == "head" and n == names[-1]:
                head = True
            else:
                raise ExportRefused(
                    f"cannot export to {framework}: it places consecutive transformer blocks on pipeline stages, "
                    f"and this plan's stage {j} holds {n!r} out of that order (a model with its own units or a "
                    f"DAG placement)")
        out.append(StageUnits(embed=embed, blocks=tuple(blocks), head=head))
    return out


def num_blocks(stages: list[StageUnits]) -> int:
    return sum(s.num_blocks for s in stages)


def sharded_data_parallel(layout: Layout) -> bool:
    """Whether autoplan runs this layout's data parallel sharded (FSDP2): ZeRO 1-3, and ZeRO-0 with
    TP or PP (DDP cannot wrap those; see :mod:`autoplan.execute.dp`). What the plan's memory counts."""
    return data_parallel_wrapper(layout)[1]


def sharded_zero0_note(layout: Layout, framework: str, exported_as: str, warnings: list[str]) -> None:
    """ZeRO-0 with TP or PP is not DDP in autoplan (see :func:`sharded_data_parallel`): say what it becomes."""
    if layout.dp > 1 and layout.zero == 0 and sharded_data_parallel(layout):
        warnings.append(f"zero=0 with tensor or pipeline parallel runs sharded in autoplan (FSDP2 without "
                        f"resharding) and the plan's memory counts it so: exported for {framework} as {exported_as}")


def recompute_counts(layout: Layout, stages: list[StageUnits]) -> list[dict[str, int]]:
    """Per chunk: how many blocks use each recompute mode."""
    out = []
    for st in stages:
        counts = {"none": 0, "selective": 0, "full": 0}
        for i in st.blocks:
            counts[layout.recompute_of(f"block.{i}")] += 1
        out.append(counts)
    return out


def uniform_recompute(layout: Layout, stages: list[StageUnits], framework: str,
                      warnings: list[str]) -> str:
    """One recompute mode for every block: the plan's, or for per-block modes the most thorough mode
    any block uses (it saves at least as much memory, so the layout still fits; it costs time)."""
    if not layout.recompute_layers:
        return layout.recompute
    modes = {m for c in recompute_counts(layout, stages) for m, k in c.items() if k}
    if len(modes) == 1:
        return modes.pop()
    mode = "full" if "full" in modes else "selective"
    warnings.append(f"{framework} takes one recompute mode for every block; this plan chooses per block "
                    f"({layout.recompute_summary()}): exported as recompute={mode} for all blocks, which saves at "
                    f"least the planned memory and adds recompute time to the blocks that did not recompute")
    return mode


def lossy_warning(layout: Layout, framework: str, warnings: list[str], *, fp16_allowed: bool = False) -> None:
    """The opt-in lossy options have no equivalent: exported as exact gradient averaging."""
    if layout.grad_compression == "fp16" and fp16_allowed:
        return
    if layout.lossy:
        what = f"{layout.grad_compression} gradient compression" if layout.grad_compression != "none" else \
            f"local SGD (averaging every {layout.sync_every} steps)"
        warnings.append(f"{framework} has no {what}: exported with exact gradient averaging every step, which "
                        f"moves more bytes per step than the plan predicts (and trains exactly)")


def model_shape(plan: Plan) -> ModelShape | None:
    """The plan's transformer shape (None for a model given as a factory or a measured profile)."""
    return ModelShape.from_dict(plan.training.shape, "training.shape") if plan.training.shape else None


def nodes_and_devices(plan: Plan) -> tuple[int, int]:
    """(nodes, devices per node) of the plan: a catalogue cluster ``NAME:NODES`` gives its node count;
    any other cluster is taken as one node holding the whole world."""
    world = plan.layout.world_size
    spec = plan.training.cluster_spec
    tail = spec.rsplit(":", 1)[1] if ":" in spec else ""
    nodes = int(tail) if tail.isdigit() and int(tail) > 0 and world % int(tail) == 0 else 1
    return nodes, world // nodes


def torchrun_prefix(plan: Plan) -> str:
    """``torchrun`` with the plan's nodes and devices per node (run the same line on every node)."""
    nodes, per_node = nodes_and_devices(plan)
    rdzv = " --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500" if nodes > 1 else ""
    return f"torchrun --nnodes {nodes} --nproc-per-node {per_node}{rdzv}"


def megatron_launch_env(layout: Layout, megatron_fsdp: bool = False) -> str:
    """The environment Megatron-LM's start-up check asks for (``validate_args`` in
    ``megatron/training/arguments.py``): with tensor or context parallel on GPUs before Blackwell,
    ``CUDA_DEVICE_MAX_CONNECTIONS=1`` (kernels queue in launch order, so TP communication overlaps
    compute); Megatron-FSDP asks for the opposite, so it gets none."""
    if (layout.tp > 1 or getattr(layout, "cp", 1) > 1) and not megatron_fsdp:
        return "CUDA_DEVICE_MAX_CONNECTIONS=1 "
    return ""


def framework_warning(plan: Plan, runs_as: str, framework: str, warnings: list[str]) -> None:
    """A plan costed for another stack than the one the export runs on (``runs_as``, in the names of
    solve's ``--framework``): say so, since its step time and memory are the other stack's."""
    if is_fp8(plan.training.precision):
        warnings.append(f"the plan trains in {plan.training.precision}: exported in bfloat16, {framework}'s fp8 "
                        f"switch is not set by this export (step time and memory were costed with fp8 GEMMs)")
    if plan.training.optimizer == "adamw-bf16":
        warnings.append(f"optimizer adamw-bf16 (16-bit Adam state) is exported as {framework}'s AdamW with fp32 "
                        f"state: 6 bytes more optimizer state per parameter (before sharding) than planned")
    costed_for = getattr(plan.training, "framework", "autoplan") or "autoplan"
    if costed_for.partition("@")[0] != runs_as:
        warnings.append(f"the plan was costed for --framework {costed_for}, not {runs_as}: its predicted step time "
                        f"and memory are {costed_for}'s, not {framework}'s (solve with --framework {runs_as} "
                        f"for {framework}'s costs)")
