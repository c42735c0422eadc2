"""What the profiler and the executor need from a built unit model: its vocabulary and sequence
length, its TP plan, its units grouped by kind, real inputs for each unit, one TP rank's slice of a unit.

Models are built from a resolved spec (:class:`autoplan.models.source.ModelSource`; the table of
spec forms is in :mod:`autoplan.models.source`). Every model built there follows the unit-model
protocol (:mod:`autoplan.models.units`), is on CPU in fp32, and is initialised deterministically
from ``seed``, so each rank of a job (and a plan made from a profile of the spec) rebuilds the same
model.

For the profiler: :func:`unit_kinds` groups units that are structurally equal (same class, same
parameter names and shapes, same role: token input / loss output) so identical blocks are measured
once; :func:`unit_inputs` gives each unit a real input (tokens for the first unit, the hidden states
the model actually produces for later ones).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn as nn

from autoplan.errors import InputError
from autoplan.models.shapes import ModelShape, tp_violation
from autoplan.models.source import resolve_plan_model
from autoplan.models.units import TensorParallelPlan, unit_module


def build_model_from_spec(spec: str, shape: dict | None = None, seed: int = 0, *,
                          load_weights: bool = False) -> nn.Module:
    """The model a plan (or a script) trains: ``spec`` and a plan's recorded transformer ``shape``
    (``training.shape``), resolved by :func:`autoplan.models.source.resolve_plan_model`, built on CPU
    in fp32 from ``seed``. For ``hf:``/factory specs the spec alone defines the model and ``shape``
    is only checked against it. ``load_weights``: an ``hf:DIR`` checkpoint's weights, loaded by
    :func:`autoplan.parallelize` (the model is returned on the meta device)."""
    return resolve_plan_model(spec, shape).build(seed, load_weights=load_weights)


def _declared(model: nn.Module, attr: str, shape_field: str) -> int:
    value = getattr(model, attr, None)
    if value is None and isinstance(getattr(model, "shape", None), ModelShape):
        value = getattr(model.shape, shape_field)
    if value is None:
        raise InputError(f"model {type(model).__name__} declares no {attr}")
    return int(value)


def model_vocab(model: nn.Module) -> int:
    """Vocabulary size of a unit model (``vocab_size``, else its transformer shape's)."""
    return _declared(model, "vocab_size", "vocab")


def model_seq_len(model: nn.Module) -> int:
    """Default training sequence length of a unit model (``seq_len``, else its shape's)."""
    return _declared(model, "seq_len", "seq_len")


def model_tp_plan(model: nn.Module) -> TensorParallelPlan | None:
    """The model's tensor-parallel plan, or None when it has none (no TP)."""
    plan = getattr(model, "tp_plan", None)
    return plan if isinstance(plan, TensorParallelPlan) else None


# --------------------------------------------------------------------------------------------
# what the profiler needs
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class UnitKind:
    """Units that are the same computation: measured once."""

    name: str
    """kind name in the profile: ``embed``, ``head``, ``block`` (``block_1``, ... for further block kinds)"""
    units: tuple[str, ...]
    """the units of this kind, in model order; ``units[0]`` is the one measured"""
    takes_tokens: bool
    """the first unit: its input is the token ids"""
    computes_loss: bool
    """the last unit: measured with the token cross-entropy of its output"""
    tp_shardable: bool
    """a block that holds every layer of the model's TP plan"""


def _signature(module: nn.Module) -> tuple:
    params = tuple((n, tuple(p.shape), p.dtype) for n, p in module.named_parameters())
    buffers = tuple((n, tuple(b.shape), b.dtype) for n, b in module.named_buffers())
    classes = tuple(type(m).__qualname__ for m in module.modules())
    return classes, params, buffers


def _holds_plan(module: nn.Module, plan: TensorParallelPlan | None) -> bool:
    if plan is None or not (plan.colwise or plan.rowwise):
        return False
    for path in (*plan.colwise, *plan.rowwise):
        try:
            sub = module.get_submodule(path)
        except AttributeError:
            return False
        if not isinstance(sub, nn.Linear):
            return False
    return True


def unit_kinds(model: nn.Module) -> list[UnitKind]:
    """Units grouped by structural equality, in order of first appearance."""
    names = model.unit_names()
    if not names:
        raise InputError("the model has no units")
    plan = model_tp_plan(model)
    groups: dict[tuple, list[str]] = {}
    for i, name in enumerate(names):
        role = (name if name in ("embed", "head") else "block", i == 0, i == len(names) - 1)
        groups.setdefault((role, _signature(unit_module(model, name))), []).append(name)
    kinds: list[UnitKind] = []
    n_block_kinds = 0
    for ((base, first, last), _), units in groups.items():
        if base == "block":
            kind_name = "block" if n_block_kinds == 0 else f"block_{n_block_kinds}"
            n_block_kinds += 1
        else:
            kind_name = base
        shardable = base == "block" and _holds_plan(unit_module(model, units[0]), plan)
        kinds.append(UnitKind(kind_name, tuple(units), takes_tokens=first, computes_loss=last,
                              tp_shardable=shardable))
    return kinds


def sample_tokens(vocab: int, mbs: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    """Random token ids ``[mbs, seq_len]`` (int64), reproducible from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(vocab, (mbs, seq_len), generator=g)


@torch.no_grad()
def unit_inputs(model: nn.Module, units: list[str], tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """The input each of ``units`` receives when ``model`` runs on ``tokens`` ``[b, s]`` (detached copies)."""
    wanted = set(units)
    got: dict[str, torch.Tensor] = {}
    handles = []
    for name in model.unit_names():
        if name not in wanted:
            continue

        def hook(_mod: nn.Module, args: tuple, name: str = name) -> None:
            if not args or not isinstance(args[0], torch.Tensor):
                raise InputError(f"unit {name!r} is not called with a tensor as its first argument")
            got[name] = args[0].detach().clone()
        handles.append(unit_module(model, name).register_forward_pre_hook(hook))
    try:
        model(tokens)
    finally:
        for h in handles:
            h.remove()
    missing = wanted - set(got)
    if missing:
        raise InputError(f"units {sorted(missing)} did not run in the model's forward")
    return got


def tp_divisors_ok(model: nn.Module, kind: UnitKind, tp: int) -> bool:
    """Whether ``tp`` divides the split dimension of every TP layer of ``kind`` (and the heads, when
    the model has a transformer shape)."""
    plan = model_tp_plan(model)
    if tp == 1:
        return True
    if plan is None or not kind.tp_shardable:
        return False
    shape = getattr(model, "shape", None)
    if isinstance(shape, ModelShape) and tp_violation(tp, heads=shape.heads, kv_heads=shape.kv_heads):
        return False
    block = unit_module(model, kind.units[0])
    return all(block.get_submodule(p).out_features % tp == 0 for p in plan.colwise) and \
        all(block.get_submodule(p).in_features % tp == 0 for p in plan.rowwise)


def _slice_linear(old: nn.Linear, out_features: int, in_features: int) -> nn.Linear:
    new = nn.Linear(in_features, out_features, bias=old.bias is not None, device=old.weight.device,
                    dtype=old.weight.dtype)
    with torch.no_grad():
        new.weight.copy_(old.weight[:out_features, :in_features])
        if old.bias is not None:
            new.bias.copy_(old.bias[:out_features])
    return new


def tp_rank_unit(module: nn.Module, plan: TensorParallelPlan, tp: int) -> nn.Module:
    """A copy of ``module`` as one of ``tp`` tensor-parallel ranks holds it (rank 0's slices):
    column-parallel linears keep ``out/tp`` output features (and their bias slice), row-parallel ones
    ``in/tp`` input features (the bias whole); everything else is whole (TP without sequence parallel).
    The module's forward must infer head counts from the projection widths (``view(..., -1, hd)``)."""
    block = copy.deepcopy(module)
    if tp == 1:
        return block
    for path, col in [(p, True) for p in plan.colwise] + [(p, False) for p in plan.rowwise]:
        lin = block.get_submodule(path)
        new = _slice_linear(lin, lin.out_features // tp if col else lin.out_features,
                            lin.in_features if col else lin.in_features // tp)
        owner, _, attr = path.rpartition(".")
        setattr(block.get_submodule(owner) if owner else block, attr, new)
    return block

