"""Tensor parallel (Megatron column/row pairs) with DTensor ``parallelize_module``.

Every block of a stage gets the model's plan: ``TP_COLWISE`` layers split their output features
(and so the attention heads), ``TP_ROWWISE`` layers split their input features and reduce the
output over the ``tp`` group. Embedding and head stay replicated (their gradients are equal on
every TP rank because their inputs and output gradients are).

Without sequence parallel (``sp=0``), per block and per direction two all-reduces of
``[b, s, h]``: the row-parallel output in forward, the column-parallel input gradient in backward.

With sequence parallel (``sp=1``) the residual stream between blocks is split along the sequence
(``[b, s/t, h]`` per rank); norms run on the local slice (``SequenceParallel``), each attention/MLP
input is all-gathered to ``[b, s, h]`` and each row-parallel output reduce-scattered back to
``[b, s/t, h]``. A stage's first block takes the full ``[b, s, h]`` and keeps its slice (no
communication); its last block all-gathers, so stages exchange full tensors and embedding/head are
untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


# Sequence-parallel names of the reference block (autoplan.models.transformer.Block): the norms that
# run on a sequence slice, and the sublayers whose input is all-gathered to the full sequence.
SP_NORMS = ("attn_norm", "mlp_norm")
SP_GATHER = ("attn", "mlp")


def block_plan(colwise: Sequence[str], rowwise: Sequence[str], *, sequence_parallel: bool,
               sp_norms: Sequence[str] = SP_NORMS, sp_gather: Sequence[str] = SP_GATHER) -> dict:
    """The ``parallelize_module`` plan of one block; keys are relative to the block."""
    plan: dict = {k: ColwiseParallel() for k in colwise}
    if not sequence_parallel:
        plan.update({k: RowwiseParallel() for k in rowwise})
        return plan
    plan.update({k: RowwiseParallel(output_layouts=Shard(1)) for k in rowwise})
    plan.update({k: SequenceParallel() for k in sp_norms})
    plan.update({k: PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
                 for k in sp_gather})
    return plan


def apply_tp(blocks: Sequence[nn.Module], tp_mesh: DeviceMesh, *, colwise: Sequence[str],
             rowwise: Sequence[str], sequence_parallel: bool, sp_norms: Sequence[str] = SP_NORMS,
             sp_gather: Sequence[str] = SP_GATHER) -> None:
    """Shard ``blocks`` (consecutive blocks of one pipeline chunk, in order) in place over ``tp_mesh``.

    Input and output of the run of blocks stay full replicated tensors ``[b, s, h]``.
    """
    plan = block_plan(colwise, rowwise, sequence_parallel=sequence_parallel, sp_norms=sp_norms,
                      sp_gather=sp_gather)
    for block in blocks:
        parallelize_module(block, tp_mesh, plan)
    if sequence_parallel and blocks:
        # [b, s, h] replicated -> local slice [b, s/t, h] on entry; all-gather back on exit.
        parallelize_module(blocks[0], tp_mesh, PrepareModuleInput(
            input_layouts=(Replicate(),), desired_input_layouts=(Shard(1),), use_local_output=True))
        parallelize_module(blocks[-1], tp_mesh, PrepareModuleOutput(
            output_layouts=(Shard(1),), desired_output_layouts=(Replicate(),), use_local_output=True))
