"""Data parallel: DDP or FSDP2 (``fully_shard``) over the ``dp`` mesh dim.

==========  ======================  =====================================================
zero        wrapper                 what is sharded over dp
==========  ======================  =====================================================
0           DDP                     nothing (gradients all-reduced), without TP or PP
0, TP/PP    fully_shard, no reshard parameters between steps: DDP cannot wrap DTensors,
                                    and under the pipelining stages DDP's reducer asserts
                                    (interleaved chunks, or 1F1B with recompute; torch 2.13)
1, 2        fully_shard, no reshard gradients and optimizer state; parameters stay
                                    gathered from forward to backward, and across a
                                    step's micro-batches (set_gradient_sync)
3           fully_shard, reshard    also parameters (gathered again in backward)
==========  ======================  =====================================================

``fully_shard`` is applied per block, then to the stage root. Both wrappers average gradients
over ``dp``: with every rank's loss a mean over its own rows, that is the mean over the batch.

Mixed precision (``param_dtype`` bf16/fp16) under ``fully_shard`` is FSDP2's own
``MixedPrecisionPolicy``: parameters are all-gathered and computed in ``param_dtype``, gradients
reduced in fp32 into the fp32 sharded parameters the optimizer steps. Under DDP the caller uses
``torch.autocast`` instead (:mod:`autoplan.execute.apply`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel


@dataclass(frozen=True)
class DPWrapped:
    """A stage module after DP: ``runner`` is what to call (the DDP wrapper, or the module itself)."""

    module: nn.Module
    """the stage module (``fully_shard`` changes it in place; DDP keeps it inside)"""
    runner: nn.Module


def use_ddp(*, zero: int, tp: int, pipelined: bool) -> bool:
    """DDP for ZeRO-0 where it works; otherwise ZeRO-0 falls back to unresharded ``fully_shard``."""
    return zero == 0 and tp == 1 and not pipelined


def reshards_after_forward(zero: int) -> bool:
    """Whether ``fully_shard`` frees a unit's gathered parameters after its forward at ZeRO level ``zero``
    (ZeRO-3; ZeRO 0-2 keep them until backward, and across a step's micro-batches: :func:`set_gradient_sync`)."""
    return zero == 3


def apply_dp(module: nn.Module, blocks: nn.ModuleDict, dp_mesh: DeviceMesh, *, zero: int, tp: int,
             pipelined: bool, param_dtype: torch.dtype | None = None, grad_compression: str = "none") -> DPWrapped:
    """Wrap a stage ``module`` whose blocks are ``blocks`` for data parallel over ``dp_mesh``.

    ``param_dtype`` (bf16/fp16; ``None`` for fp32) sets FSDP2 mixed precision; DDP ignores it.
    ``grad_compression`` (lossy, DDP only): ``fp16`` registers DDP's ``fp16_compress_hook``,
    ``powersgd`` its ``powerSGD_hook`` (rank :data:`~autoplan.plan.plan.POWERSGD_RANK`, error feedback,
    exact all-reduce for the first 2 steps).
    """
    if use_ddp(zero=zero, tp=tp, pipelined=pipelined):
        ddp = DistributedDataParallel(module, process_group=dp_mesh.get_group(), device_ids=None)
        register_compression(ddp, grad_compression, dp_mesh.get_group())
        return DPWrapped(module=module, runner=ddp)
    if grad_compression != "none":
        raise ValueError("gradient compression needs DDP (zero=0, tp=1, pp=1)")
    reshard = reshards_after_forward(zero)
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32 if param_dtype else None)
    for block in blocks.values():
        fully_shard(block, mesh=dp_mesh, reshard_after_forward=reshard, mp_policy=mp)
    fully_shard(module, mesh=dp_mesh, reshard_after_forward=reshard, mp_policy=mp)
    return DPWrapped(module=module, runner=module)


def register_compression(ddp: DistributedDataParallel, kind: str, group) -> None:
    """Register DDP's communication hook for lossy gradient compression ``kind``."""
    if kind == "none":
        return
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    from autoplan.plan.plan import POWERSGD_RANK
    if kind == "fp16":
        ddp.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif kind == "powersgd":
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=POWERSGD_RANK,
                                            start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    else:
        raise ValueError(f"unknown gradient compression {kind!r}")


def set_gradient_sync(runner: nn.Module, enabled: bool, *, reshard_after_backward: bool = True) -> None:
    """Turn DP gradient reduction on or off for the next backward (gradient accumulation).

    ``reshard_after_backward`` (``fully_shard`` only): False keeps the gathered parameters after the
    backward, for the next micro-batch's forward. ZeRO 0-2 pass False for every micro-batch but a
    step's last: they keep the parameters gathered from forward to backward, and FSDP2, which by
    default frees them after every backward, would gather them again before each micro-batch's
    forward (m all-gathers a step instead of the one the cost model counts; torch's pipelining
    stages do the same for theirs). The last backward must reshard, so that the optimizer's update
    of the shards reaches the next step's gather."""
    if isinstance(runner, FSDPModule):
        runner.set_requires_gradient_sync(enabled)
        runner.set_reshard_after_backward(reshard_after_backward)
    elif isinstance(runner, DistributedDataParallel):
        runner.require_backward_grad_sync = enabled
