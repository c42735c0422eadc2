"""Activation recomputation (checkpointing) per block.

- ``none``: every activation is kept for backward.
- ``full``: ``checkpoint_wrapper`` per block; only the block input ``[b, s, h]`` is kept and the
  whole block runs again in backward.
- ``selective``: the block is checkpointed with an op-level policy
  (``create_selective_checkpoint_contexts``) that keeps the matmul outputs (and the results of
  TP collectives, so backward does not communicate again) and recomputes the cheap rest: norms,
  GELU and the attention core (``softmax(q k^T) v``, the ``5 a s / h`` term of the activation
  estimate in DESIGN.md).

Wrapping changes parameter names by the infix ``_checkpoint_wrapped_module.``;
:func:`canonical_name` removes it.
"""

from __future__ import annotations


import torch
import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    _CHECKPOINT_PREFIX,
    CheckpointImpl,
    checkpoint_wrapper,
)
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

# Ops whose outputs selective recompute keeps: the matmuls (the FLOPs) and the TP collectives.
_SAVE_OPS = {
    torch.ops.aten.mm.default,
    torch.ops.aten.addmm.default,
    torch.ops.aten.bmm.default,
    torch.ops._c10d_functional.all_reduce.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
    torch.ops._c10d_functional.all_gather_into_tensor.default,
    torch.ops._c10d_functional.wait_tensor.default,
}


def _save_matmuls(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in _SAVE_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def _selective_context():
    return create_selective_checkpoint_contexts(_save_matmuls)


def wrap_block(block: nn.Module, mode: str) -> nn.Module:
    """``block`` wrapped for recompute ``mode`` (``none`` returns it unchanged)."""
    if mode == "none":
        return block
    if mode == "full":
        return checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    if mode == "selective":
        return checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.NO_REENTRANT,
                                  context_fn=_selective_context)
    raise ValueError(f"unknown recompute mode {mode!r}")


def apply_recompute(blocks: nn.ModuleDict, *, mode: str, per_block: dict[str, str] | None = None) -> None:
    """Replace every block of ``blocks`` (in place) by its recompute wrapper: ``per_block`` maps a
    block's key (``"3"`` for ``block.3``) to its own mode, the others get ``mode``."""
    for key in list(blocks.keys()):
        blocks[key] = wrap_block(blocks[key], (per_block or {}).get(key, mode))


def canonical_name(name: str) -> str:
    """A parameter name without the wrappers' infixes (checkpoint, DDP's ``module.``)."""
    return name.replace(_CHECKPOINT_PREFIX, "")
