"""Pipeline receive buffers just in time: held only while their micro-batch is in flight.

Targets torch 2.13 (``torch.distributed.pipelining.stage.PipelineStage``). There, when a schedule
first runs, ``_prepare_forward_infra`` gives every micro-batch of a stage one ``_RecvInfo`` per
input with a ``buffer`` allocated from its ``tensor_meta`` (``args_recv_info[mb]``: activations), and
``_prepare_backward_infra`` does the same for the gradients of its outputs (``grad_recv_info[mb]``).
The schedules receive into ``get_fwd_recv_ops(mb)`` / ``get_bwd_recv_ops(mb)`` and compute from
the same buffers, which are never freed: 2 x m buffers per cut for the whole step (and the
activation buffers keep their ``.grad`` until the next step). Megatron holds a receive buffer only
until the backward that consumes it (pytorch issue 136380; PRs 193872 / 196463 do it in torch).

:class:`JitRecvStage` keeps torch's descriptors and order and changes only the buffers' lifetime:

- a receive buffer is made from its descriptor's ``tensor_meta`` (torch's own
  ``_make_tensor_from_meta``) when the schedule asks for that micro-batch's receive ops, so the
  schedule's order (GPipe, 1F1B, interleaved's posted-ahead receives) decides when;
- the descriptor lets go of it when the stage's backward of that micro-batch is done (the
  activation: autograd held it as the chunk's input until then; the gradient: consumed by that
  backward), or after the forward when there is no backward (evaluation). An activation buffer
  this stage allocated also gives its storage back then (``resize_(0)``, as Megatron frees a sent
  output): on the last stage the schedule keeps every micro-batch's loss until the step ends, and
  the loss's spent autograd graph still references the chunk's input leaf, i.e. the buffer;
- the per-micro-batch buffers torch allocates at set-up are dropped as soon as it has made them.

So a rank holds the activations of its in-flight micro-batches (which the chunk's first layer
saves for backward anyway) and a gradient buffer only from its receive to its backward.

Sends (``own_sends``, for the interleaved schedules): torch's ``_PipelineScheduleRuntime`` launches
every send of the step and waits for all of them only when the step ends, and each send's work
keeps its tensor, so every micro-batch's outputs and input gradients would stay until then (m per
chunk and direction). With ``own_sends`` the stage launches its sends itself (the same
``dist.isend`` torch's ``_batch_p2p`` issues for a batch of sends, which is what the runtime's
SEND actions are) and gives the schedule nothing to launch. It waits for the send of a
micro-batch's output when its backward starts (the gradient has come back, so the next stage has
received it: the wait returns at once) and lets go of an input gradient's send once done: NCCL
works say so (``is_completed()``); gloo's send works complete only when waited, and a gloo send
waits for the peer's receive, so a waiter thread of the stage waits for them (it releases the GIL
while it waits) and the stage drops those it has seen done whenever it sends again. What is left
is waited for when the next step starts (torch waits at the end of its step). The schedules of
one stage per rank (GPipe, 1F1B) batch a send with a receive to avoid deadlocks and wait within
the step: they keep torch's sends.
"""

from __future__ import annotations

import importlib.util
import inspect
import warnings
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import stage as torch_stage

TARGET_TORCH = "2.13"
"""the torch release whose pipelining internals :class:`JitRecvStage` was written against"""

TORCH_JIT_MODULE = "torch.distributed.pipelining._recv_buffers"
"""where torch's own just-in-time receive buffers live once they ship (PR 196463)"""

INTERNALS: dict[str, tuple[str, ...]] = {
    # PipelineStage methods overridden here, with the parameters passed through
    "get_fwd_recv_ops": ("fwd_chunk_id",),
    "get_bwd_recv_ops": ("bwd_chunk_id",),
    "forward_one_chunk": ("fwd_chunk_id", "args", "kwargs", "save_forward_output"),
    "backward_one_chunk": ("bwd_chunk_id", "loss", "full_backward", "last_backward"),
    "backward_weight_one_chunk": ("bwd_chunk_id", "last_backward"),
    "set_local_bwd_input": ("next_stage_bwd_outputs", "mb_index"),
    "get_fwd_send_ops": ("fwd_chunk_id",),
    "get_bwd_send_ops": ("bwd_chunk_id",),
    "clear_runtime_states": (),
    "_prepare_forward_infra": ("num_microbatches", "args", "kwargs", "has_backward"),
    "_prepare_backward_infra": ("num_microbatches", "loss_fn", "target", "received_grad_meta", "loss_kwargs"),
}
"""the PipelineStage methods :class:`JitRecvStage` overrides and the parameters it relies on;
besides these: ``args_recv_info`` / ``grad_recv_info`` (micro-batch -> tuple of ``_RecvInfo``),
``_RecvInfo(buffer, tensor_meta, is_root_arg)`` and ``stage._make_tensor_from_meta``"""


def torch_allocates_just_in_time() -> bool:
    """Whether the installed torch allocates pipeline receive buffers just in time itself."""
    return importlib.util.find_spec(TORCH_JIT_MODULE) is not None


def missing_internals() -> list[str]:
    """The torch internals :class:`JitRecvStage` relies on that the installed torch lacks (empty
    when all are there)."""
    missing = []
    for name, params in INTERNALS.items():
        fn = getattr(PipelineStage, name, None)
        if fn is None:
            missing.append(f"PipelineStage.{name}")
            continue
        have = inspect.signature(fn).parameters
        missing += [f"PipelineStage.{name}({p})" for p in params if p not in have]
    info = getattr(torch_stage, "_RecvInfo", None)
    if info is None:
        missing.append("stage._RecvInfo")
    else:
        have = inspect.signature(info.__init__).parameters
        missing += [f"_RecvInfo({p})" for p in ("buffer", "tensor_meta", "is_root_arg") if p not in have]
    if not callable(getattr(torch_stage, "_make_tensor_from_meta", None)):
        missing.append("stage._make_tensor_from_meta")
    return missing


def _allocate(infos: Iterable[Any], device: torch.device) -> list[torch.Tensor]:
    """Give every receiving descriptor without a buffer a fresh one, as torch's set-up would;
    returns the new buffers."""
    made = []
    for info in infos:
        if not info.is_root_arg and info.buffer is None and info.tensor_meta is not None:
            info.buffer = torch_stage._make_tensor_from_meta(info.tensor_meta, device)
            made.append(info.buffer)
    return made


def _release(infos: Iterable[Any]) -> None:
    """Drop the descriptors' references to their buffers (the metadata stays for the next receive)."""
    for info in infos:
        if not info.is_root_arg:
            info.buffer = None


class JitRecvStage(PipelineStage):
    """A ``PipelineStage`` whose receive buffers exist only from their receive until the
    computation that consumes them is done (module docstring). Same constructor and behaviour."""

    def __init__(self, *args, own_sends: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._received_acts: dict[int, list[torch.Tensor]] = {}
        """micro-batch -> the activation buffers this stage allocated for it and has not freed"""
        self._own_sends = own_sends
        self._sends: list[tuple[str, int, dist.Work, Future | None]] = []
        """(fwd | bwd, micro-batch, work, its waiter's future on gloo) of the sends this stage
        launched and still holds"""
        self._waiter: ThreadPoolExecutor | None = None

    def clear_runtime_states(self) -> None:
        for _, _, work, waited in self._sends:
            waited.result() if waited is not None else work.wait()
        self._sends.clear()
        super().clear_runtime_states()

    def _send(self, kind: str, mb: int, ops: list[dist.P2POp]) -> list[dist.P2POp]:
        """With ``own_sends``: launch the send ops here, hold their works until done, and leave
        nothing for the schedule; otherwise hand the ops to it."""
        if not self._own_sends or not ops:
            return ops
        self._sends = [s for s in self._sends if not (s[3].done() if s[3] is not None else s[2].is_completed())]
        for op in ops:
            work = dist.isend(op.tensor, group=op.group, tag=op.tag, group_dst=op.group_peer)
            waited = None
            if kind == "bwd" and dist.get_backend(op.group) == "gloo":
                if self._waiter is None:
                    self._waiter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="autoplan-pp-send")
                waited = self._waiter.submit(work.wait)
            self._sends.append((kind, mb, work, waited))
        return []

    def get_fwd_send_ops(self, fwd_chunk_id: int):
        return self._send("fwd", fwd_chunk_id, super().get_fwd_send_ops(fwd_chunk_id))

    def get_bwd_send_ops(self, bwd_chunk_id: int):
        return self._send("bwd", bwd_chunk_id, super().get_bwd_send_ops(bwd_chunk_id))

    def _prepare_forward_infra(self, num_microbatches, args, kwargs=None, has_backward=False):
        out = super()._prepare_forward_infra(num_microbatches, args, kwargs, has_backward)
        for infos in self.args_recv_info.values():
            _release(infos)
        return out

    def _prepare_backward_infra(self, num_microbatches, loss_fn=None, target=None, received_grad_meta=None,
                                loss_kwargs=None):
        out = super()._prepare_backward_infra(num_microbatches, loss_fn, target, received_grad_meta, loss_kwargs)
        for infos in self.grad_recv_info.values():
            _release(infos)
        return out

    def get_fwd_recv_ops(self, fwd_chunk_id: int):
        self._received_acts[fwd_chunk_id] = _allocate(self.args_recv_info[fwd_chunk_id], self.device)
        return super().get_fwd_recv_ops(fwd_chunk_id)

    def get_bwd_recv_ops(self, bwd_chunk_id: int):
        _allocate(self.grad_recv_info[bwd_chunk_id], self.device)
        return super().get_bwd_recv_ops(bwd_chunk_id)

    def set_local_bwd_input(self, next_stage_bwd_outputs, mb_index: int) -> None:
        # same-rank hand-over (V schedules): torch zeroes the buffer of a gradient that is None
        _allocate(self.grad_recv_info[mb_index], self.device)
        super().set_local_bwd_input(next_stage_bwd_outputs, mb_index)

    def forward_one_chunk(self, fwd_chunk_id: int, args, kwargs=None, save_forward_output: bool = True):
        out = super().forward_one_chunk(fwd_chunk_id, args, kwargs, save_forward_output)
        if not self.has_backward:
            # the output may be a view of the input and kept for the caller: drop the reference only
            _release(self.args_recv_info.get(fwd_chunk_id, ()))
            self._received_acts.pop(fwd_chunk_id, None)
        return out

    def backward_one_chunk(self, bwd_chunk_id: int, loss=None, full_backward: bool = True, last_backward=False):
        # the gradient of this micro-batch's output has arrived: the output's send is done
        for kind, mb, work, _ in self._sends:
            if kind == "fwd" and mb == bwd_chunk_id:
                work.wait()
        self._sends = [s for s in self._sends if not (s[0] == "fwd" and s[1] == bwd_chunk_id)]
        super().backward_one_chunk(bwd_chunk_id, loss=loss, full_backward=full_backward, last_backward=last_backward)
        self._release_consumed(bwd_chunk_id, done=full_backward)
        _release(self.grad_recv_info.get(bwd_chunk_id, ()))

    def backward_weight_one_chunk(self, bwd_chunk_id: int, last_backward=False):
        super().backward_weight_one_chunk(bwd_chunk_id, last_backward=last_backward)
        self._release_consumed(bwd_chunk_id, done=True)

    def _release_consumed(self, mb: int, *, done: bool) -> None:
        """Once micro-batch ``mb``'s backward is complete (``done``: the weight gradients too, which
        split backwards compute from the saved input later), free its activation buffers."""
        if not done:
            return
        _release(self.args_recv_info.get(mb, ()))
        for buf in self._received_acts.pop(mb, ()):
            buf.untyped_storage().resize_(0)


def stage_class(jit: bool = True) -> type[PipelineStage]:
    """The stage class for this torch: torch's own ``PipelineStage`` where it allocates just in
    time itself or ``jit`` is off; :class:`JitRecvStage` where its internals are the ones this
    module targets; else (a warning) torch's stock allocation."""
    if not jit or torch_allocates_just_in_time():
        return PipelineStage
    missing = missing_internals()
    if missing:
        warnings.warn(f"torch {torch.__version__} lacks the pipelining internals autoplan's just-in-time "
                      f"receive buffers were written for (torch {TARGET_TORCH}): {', '.join(missing)}; "
                      "pipeline stages keep a receive buffer per micro-batch, more memory than the plan counts",
                      RuntimeWarning, stacklevel=2)
        return PipelineStage
    return JitRecvStage


def make_stage(submodule: nn.Module, stage_index: int, num_stages: int, device: torch.device, *, group,
               jit: bool = True, own_sends: bool = False) -> PipelineStage:
    """A pipeline stage for ``submodule`` (shapes inferred at run time) with just-in-time receive
    buffers, or torch's stock allocation with ``jit=False``; ``own_sends`` (for the schedules of
    several stages per rank, module docstring) where the stage is autoplan's."""
    cls = stage_class(jit)
    if cls is JitRecvStage:
        return cls(submodule, stage_index, num_stages, device, group=group, own_sends=own_sends)
    return cls(submodule, stage_index, num_stages, device, group=group)
