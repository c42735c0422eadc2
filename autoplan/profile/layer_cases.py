"""The modules the layer profiler measures, with their inputs: a :class:`LayerCase` per (kind, mbs, TP degree).

For a transformer shape (:func:`make_case`)::

    kind   input                      measured module
    embed  tokens [b, s] int64        nn.Embedding(vocab, h)                      -> x [b, s, h]
    block  x [b, s, h]                Block with heads/t, kv_heads/t, ffn/t       -> x [b, s, h]
    head   x [b, s, h], targets [b,s] Head + cross-entropy loss                   -> logits [b, s, V]

For any unit model (:func:`unit_case`) the first unit of a kind, fed the input it really receives
in the model, at one TP rank's slices (:func:`autoplan.models.registry.tp_rank_unit`).
What is measured on a case is in :mod:`autoplan.profile.layer_figures`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from autoplan.errors import InputError
from autoplan.models.registry import UnitKind, model_tp_plan, tp_rank_unit
from autoplan.models.shapes import ModelShape
from autoplan.models.transformer import LAYER_KINDS, TP_COLWISE, TP_ROWWISE, Block, Head, tp_degrees_allowed
from autoplan.models.units import unit_module


def _replace_linear(parent: nn.Module, path: str, in_features: int, out_features: int) -> None:
    """Replace the bias-free ``nn.Linear`` at ``path`` by the leading [out, in] slice of its weight."""
    old = parent.get_submodule(path)
    if not isinstance(old, nn.Linear):
        raise TypeError(f"TP plan names {path!r}, which is a {type(old).__name__}, not nn.Linear")
    new = nn.Linear(in_features, out_features, bias=False, device=old.weight.device, dtype=old.weight.dtype)
    with torch.no_grad():
        new.weight.copy_(old.weight[:out_features, :in_features])
    owner_path, _, attr = path.rpartition(".")
    setattr(parent.get_submodule(owner_path) if owner_path else parent, attr, new)


def check_tp_degree(shape: ModelShape, tp: int) -> None:
    """InputError unless ``tp`` divides the heads, KV heads and MLP width of ``shape``."""
    if tp not in tp_degrees_allowed(shape):
        raise InputError(f"TP degree {tp} does not divide heads {shape.heads}, kv_heads {shape.kv_heads} "
                         f"and ffn_hidden {shape.ffn_hidden} of {shape.name!r} "
                         f"(allowed: {tp_degrees_allowed(shape)})")


def tp_rank_block(shape: ModelShape, tp: int) -> Block:
    """The part of a ``Block`` one of ``tp`` tensor-parallel ranks holds (rank 0's slices).

    Column-parallel projections keep ``out/tp`` output features, row-parallel ones ``in/tp``
    input features; the norms are whole (no sequence parallel).  ``Attention.forward`` infers
    the local head count from the projection width, so the forward runs unchanged."""
    check_tp_degree(shape, tp)
    block = Block(shape)
    if tp == 1:
        return block
    for path in TP_COLWISE:
        lin = block.get_submodule(path)
        _replace_linear(block, path, lin.in_features, lin.out_features // tp)
    for path in TP_ROWWISE:
        lin = block.get_submodule(path)
        _replace_linear(block, path, lin.in_features // tp, lin.out_features)
    return block


def build_layer(kind: str, shape: ModelShape, tp: int = 1) -> nn.Module:
    """The module measured for ``kind`` (see the module docstring), on CPU in fp32."""
    if kind == "embed":
        return nn.Embedding(shape.vocab, shape.hidden)
    if kind == "block":
        return tp_rank_block(shape, tp)
    if kind == "head":
        return Head(shape)
    raise InputError(f"unknown layer kind {kind!r} (known: {', '.join(LAYER_KINDS)})")


@dataclass
class LayerCase:
    """A module with its inputs and the function that runs one training forward of it."""

    module: nn.Module
    inputs: tuple[torch.Tensor, ...]
    upstream_grad: torch.Tensor | None
    """fixed gradient of the output for ``backward``; ``None`` when the forward returns a loss"""
    with_loss: bool = False
    """inputs are ``(x, targets)`` and the forward ends in the token cross-entropy (a model's last
    unit); always so for the reference ``Head``"""
    autocast_dtype: torch.dtype | None = None
    """mixed precision: each forward runs under ``torch.autocast`` to this dtype (None: plain)"""

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(tensor to call backward on, the module's output tensor)."""
        if self.autocast_dtype is None:
            return self._forward()
        device_type = next(iter(self.inputs)).device.type
        with torch.autocast(device_type, dtype=self.autocast_dtype):
            return self._forward()

    def _forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.with_loss or isinstance(self.module, Head):
            x, targets = self.inputs
            logits = self.module(x)                                          # [b, s, V]
            loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
            return loss, logits
        out = self.module(*self.inputs)
        return out, out

    def backward(self, root: torch.Tensor) -> None:
        torch.autograd.backward(root, self.upstream_grad)


def make_case(kind: str, shape: ModelShape, tp: int, mbs: int, seq_len: int, device: torch.device,
               dtype: torch.dtype, seed: int = 0, autocast_dtype: torch.dtype | None = None) -> LayerCase:
    """``kind`` on inputs of ``mbs`` sequences; parameters and floating inputs in ``dtype`` (fp32 under
    mixed precision), each forward under autocast to ``autocast_dtype`` when given."""
    case = _make_plain_case(kind, shape, tp, mbs, seq_len, device, dtype, seed)
    case.autocast_dtype = autocast_dtype
    return case


def _make_plain_case(kind: str, shape: ModelShape, tp: int, mbs: int, seq_len: int, device: torch.device,
                     dtype: torch.dtype, seed: int) -> LayerCase:
    torch.manual_seed(seed)
    module = build_layer(kind, shape, tp).to(device=device, dtype=dtype)
    g = torch.Generator(device="cpu").manual_seed(seed)
    if kind == "embed":
        tokens = torch.randint(shape.vocab, (mbs, seq_len), generator=g).to(device)   # [b, s]
        grad = torch.randn(mbs, seq_len, shape.hidden, generator=g).to(device=device, dtype=dtype)
        return LayerCase(module, (tokens,), grad)
    x = torch.randn(mbs, seq_len, shape.hidden, generator=g).to(device=device, dtype=dtype)
    x.requires_grad_(True)                                       # a pipeline stage needs dL/dx
    if kind == "head":
        targets = torch.randint(shape.vocab, (mbs, seq_len), generator=g).to(device)
        return LayerCase(module, (x, targets), None)
    grad = torch.randn(mbs, seq_len, shape.hidden, generator=g).to(device=device, dtype=dtype)
    return LayerCase(module, (x,), grad)


def unit_case(model: nn.Module, kind: UnitKind, tp: int, inputs: torch.Tensor, vocab: int,
               device: torch.device, dtype: torch.dtype, seed: int = 0,
               autocast_dtype: torch.dtype | None = None) -> LayerCase:
    """The measured case of ``kind`` at TP degree ``tp`` on ``inputs`` (its real input at this mbs)."""
    plan = model_tp_plan(model)
    module = unit_module(model, kind.units[0])
    module = tp_rank_unit(module, plan, tp) if plan is not None and tp > 1 else copy.deepcopy(module)
    module = module.to(device=device, dtype=dtype)
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = inputs.to(device)
    if x.is_floating_point():
        x = x.to(dtype).requires_grad_(True)                 # a pipeline stage needs dL/dx
    if kind.computes_loss:
        targets = torch.randint(vocab, tuple(x.shape[:2]), generator=g).to(device)
        return LayerCase(module, (x, targets), None, with_loss=True, autocast_dtype=autocast_dtype)
    with torch.no_grad(), torch.autocast(device.type, dtype=autocast_dtype or torch.float32,
                                         enabled=autocast_dtype is not None):
        out = module(x)
    grad = torch.randn(out.shape, generator=g).to(device=device, dtype=out.dtype)
    return LayerCase(module, (x,), grad, autocast_dtype=autocast_dtype)
