"""The unit-model protocol: what the profiler, the planner and the executor need from a model.

A *unit model* is an ``nn.Module`` with::

    embed         nn.Module | None      first unit: tokens [b, s] int64 -> hidden [b, s, h]
    blocks        nn.ModuleDict         units "block.0" .. "block.N-1", keyed "0".."N-1"
    head          nn.Module | None      last unit: hidden -> logits [b, s, vocab]
    unit_names()  -> list[str]          "embed", "block.i", "head" present, in execution order
    keep_units(names) -> self           delete (in place) every unit not named (cuts a pipeline stage)
    forward(x)                          tokens on the first stage, hidden states on later ones
    tp_plan       TensorParallelPlan | None   applied by the executor to every block
    vocab_size    int                   size of the token vocabulary (synthetic data, loss)
    seq_len       int                   default training sequence length

:class:`UnitModel` implements all but the modules themselves; the reference
:class:`~autoplan.models.transformer.Transformer` and the adapters derive from it.
Keeping units in place (``nn.ModuleDict`` with the original keys) keeps parameter names equal
across pipeline layouts, which distributed-checkpoint resharding needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass(frozen=True)
class TensorParallelPlan:
    """Which submodules of a block tensor parallel splits, by name relative to the block.

    A model exposes it as ``model.tp_plan``; the executor applies it to every block."""

    colwise: tuple[str, ...]
    """linears whose output features are split (and so the attention heads)"""
    rowwise: tuple[str, ...]
    """linears whose input features are split; their output is all-reduced (reduce-scattered with SP)"""
    sp_norms: tuple[str, ...] = ()
    """norms that run on a sequence slice under sequence parallel"""
    sp_gather: tuple[str, ...] = ()
    """sublayers whose input is all-gathered to the full sequence under sequence parallel"""


class UnitModel(nn.Module):
    """Base of the adapters: ``embed`` (optional), ``blocks``, ``head`` (optional) run in order."""

    tp_plan: TensorParallelPlan | None = None

    def __init__(self, embed: nn.Module | None, blocks: list[nn.Module] | nn.ModuleDict,
                 head: nn.Module | None, *, vocab_size: int, seq_len: int):
        super().__init__()
        self.embed = embed
        self.blocks = blocks if isinstance(blocks, nn.ModuleDict) else \
            nn.ModuleDict({str(i): b for i, b in enumerate(blocks)})
        self.head = head
        self.vocab_size = int(vocab_size)
        self.seq_len = int(seq_len)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens ``[b, s]`` (when this module holds ``embed``) or hidden states -> the last unit's output."""
        h = self.embed(x) if self.embed is not None else x
        for blk in self.blocks.values():
            h = blk(h)
        return self.head(h) if self.head is not None else h

    def unit_names(self) -> list[str]:
        """Pipeline units present in this module, in execution order."""
        names = ["embed"] if self.embed is not None else []
        names += [f"block.{k}" for k in self.blocks.keys()]
        if self.head is not None:
            names.append("head")
        return names

    def keep_units(self, names: list[str]) -> "UnitModel":
        """Delete (in place) every unit not in ``names``; returns self. Used to cut a stage."""
        keep = set(names)
        if "embed" not in keep:
            self.embed = None
        if "head" not in keep:
            self.head = None
        for k in list(self.blocks.keys()):
            if f"block.{k}" not in keep:
                del self.blocks[k]
        return self

    def unit(self, name: str) -> nn.Module:
        """The module of unit ``name`` (``embed``, ``head`` or ``block.i``)."""
        return unit_module(self, name)


def unit_module(model: nn.Module, name: str) -> nn.Module:
    """The module of unit ``name`` in any unit model (``embed``, ``head``, ``block.<key>``)."""
    if name in ("embed", "head"):
        mod = getattr(model, name, None)
    elif name.startswith("block."):
        blocks = getattr(model, "blocks")
        key = name[len("block."):]
        mod = blocks[key] if key in blocks else None
    else:
        mod = None
    if mod is None:
        raise KeyError(f"model has no unit {name!r} (units: {model.unit_names()})")
    return mod
