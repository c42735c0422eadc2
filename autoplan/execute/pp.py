"""Pipeline parallel: cut the model into this rank's stage chunks, then build the schedule.

``layout.stages`` lists ``pp * vp`` chunks of unit names; pipeline rank ``r`` owns chunks
``r, r + pp, r + 2 pp, ...`` (``vp`` of them; one unless the schedule is interleaved). A chunk is a
deep copy of the whole model with the other units deleted (``keep_units``), so parameter names
match the unsplit model.

Between chunks flow hidden states ``[mbs, s, h]``; the first chunk takes tokens ``[mbs, s]``, the last
returns logits ``[mbs, s, vocab]`` and the schedule applies ``loss_fn(logits, labels)`` per
micro-batch. The schedule divides gradients by ``n_microbatches`` (``scale_grads``), so with a
mean-per-micro-batch loss the gradients are those of the mean over the rank's rows.

The stages are :mod:`autoplan.execute.pp_buffers`' (torch 2.13): receive buffers exist only while
their micro-batch is in flight, where torch allocates one per micro-batch for the whole step.
What a schedule is (the micro-batch counts it accepts, its order of operations) is
:mod:`autoplan.plan.schedules`, which the planner follows too; ``execute/apply.py`` checks a layout
against it before any collective.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn as nn

from autoplan.errors import LayoutError

if TYPE_CHECKING:
    from torch.distributed.pipelining.schedules import PipelineScheduleMulti, PipelineScheduleSingle

# torch.distributed.pipelining (and pp_buffers, which builds on it) is imported inside build_schedule:
# it pulls in torch._dynamo, about a second of every worker's start, which a plan without pipeline
# parallelism never uses.


def stage_ids(pp_rank: int, *, pp: int, vp: int) -> list[int]:
    """Global chunk indices owned by ``pp_rank``: ``[pp_rank, pp_rank + pp, ...]``."""
    return [pp_rank + i * pp for i in range(vp)]


def split_model(model: nn.Module, stages: Sequence[Sequence[str]], ids: Sequence[int]) -> list[nn.Module]:
    """One deep copy of ``model`` per chunk in ``ids``, keeping only that chunk's units."""
    return [copy.deepcopy(model).keep_units(list(stages[i])) for i in ids]


def build_schedule(runners: Sequence[nn.Module], ids: Sequence[int], *, num_stages: int, schedule: str,
                   n_microbatches: int, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                   device: torch.device, group: dist.ProcessGroup, jit_recv_buffers: bool = True
                   ) -> PipelineScheduleSingle | PipelineScheduleMulti:
    """Wrap each chunk in a pipeline stage (shapes inferred at run time) and make the schedule.
    Receive buffers are allocated just in time (:mod:`autoplan.execute.pp_buffers`) unless
    ``jit_recv_buffers`` is False (torch's stock allocation: one per micro-batch for the step)."""
    from torch.distributed.pipelining.schedules import Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

    from autoplan.execute.pp_buffers import make_stage
    stages = [make_stage(r, i, num_stages, device, group=group, jit=jit_recv_buffers, own_sends=schedule == "interleaved")
              for r, i in zip(runners, ids)]
    if schedule == "interleaved":
        return ScheduleInterleaved1F1B(stages, n_microbatches=n_microbatches, loss_fn=loss_fn)
    if len(stages) != 1:
        raise LayoutError(f"schedule {schedule} runs one stage per rank, got {len(stages)}")
    cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule]
    return cls(stages[0], n_microbatches=n_microbatches, loss_fn=loss_fn)
