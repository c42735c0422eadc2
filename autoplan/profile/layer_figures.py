"""The figures measured on one layer case: forward/backward time, saved and kept activation bytes,
the cost of selective recomputation, and the optimizer step time per parameter.

What each figure means is in :mod:`autoplan.profile.layers` (the module docstring); each is a
small function usable on any module (:class:`~autoplan.profile.layer_cases.LayerCase`), timed as
:mod:`autoplan.profile.timing` times work.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Callable

import torch

from autoplan.models.shapes import ModelShape
from autoplan.models.transformer import Block
from autoplan.profile.formats import LayerTiming
from autoplan.profile.layer_cases import LayerCase
from autoplan.profile.timing import Clock, TimingSettings, inner_iterations, median_per_call


_COPY_NODES = frozenset({"ToCopyBackward0", "TBackward0", "ViewBackward0", "TransposeBackward0",
                         "PermuteBackward0", "ExpandBackward0", "UnsqueezeBackward0", "SqueezeBackward0",
                         "SqueezeBackward1", "CloneBackward0", "AliasBackward0"})
"""autograd nodes of casts and views: a tensor reached from a parameter through these alone is a copy of it"""


def is_parameter_copy(t: torch.Tensor, params: list[torch.Tensor], max_depth: int = 6) -> bool:
    """Whether ``t`` is a cast or view of one parameter (autocast's 16-bit weight copy, or its
    transpose): its autograd history is a chain of casts and views ending at a parameter's leaf."""
    ids = {id(p) for p in params}
    fn = t.grad_fn
    for _ in range(max_depth):
        if fn is None:
            return False
        if type(fn).__name__ == "AccumulateGrad":
            return id(fn.variable) in ids
        if type(fn).__name__ not in _COPY_NODES:
            return False
        nexts = [f for f, _ in fn.next_functions if f is not None]
        if len(nexts) != 1:
            return False
        fn = nexts[0]
    return False


def saved_activation_bytes(run_forward: Callable[[], object], params: list[torch.Tensor]) -> int:
    """Bytes autograd saves for backward while ``run_forward()`` runs: unique storages, the
    whole storage of each, parameters (and views of them) and copies of parameters (autocast's
    16-bit weights, :func:`is_parameter_copy`) excluded."""
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}
    storages: dict[int, int] = {}
    keep_alive: list[torch.Tensor] = []   # data_ptr is only unique while the tensor lives

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr and ptr not in param_ptrs and ptr not in storages and not is_parameter_copy(t, params):
            storages[ptr] = st.nbytes()
            keep_alive.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = run_forward()
    del result
    keep_alive.clear()      # (cleared, not deleted: pack's closure refers to it)
    return sum(storages.values())


def time_forward_backward(case: LayerCase, settings: TimingSettings) -> tuple[float, float]:
    """(median forward seconds, median backward seconds) of one layer case."""
    clock = Clock(settings.device)
    fwd_warm: list[float] = []
    bwd_warm: list[float] = []
    for _ in range(max(1, settings.warmup)):
        with clock.measure(fwd_warm):
            root, _ = case.forward()
        with clock.measure(bwd_warm):
            case.backward(root)
        del root
    fwd_inner = inner_iterations(min(fwd_warm), settings)
    bwd_inner = inner_iterations(min(bwd_warm), settings)

    forward_s = median_per_call(case.forward, fwd_inner, settings.repeats, clock)

    bwd_samples: list[float] = []
    for _ in range(settings.repeats):
        parts: list[float] = []
        for _ in range(bwd_inner):
            root, _ = case.forward()
            clock.sync()
            with clock.measure(parts):
                case.backward(root)
            del root
        bwd_samples.append(sum(parts) / bwd_inner)
    return forward_s, statistics.median(bwd_samples)


def retained_bytes(case: LayerCase) -> int:
    """Bytes one forward of ``case`` leaves allocated until its backward, its output excluded:
    whatever autograd and checkpointing keep, counted by the allocator (``memory_allocated`` on
    CUDA, :class:`~autoplan.profile.memory.LiveTensorTracker` on CPU). Unlike
    :func:`saved_activation_bytes` this sees what a checkpoint wrapper stores outside autograd's
    saved-tensor hooks (selective recomputation's kept outputs)."""
    device = case.inputs[0].device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        root, out = case.forward()
        torch.cuda.synchronize(device)
        kept = torch.cuda.memory_allocated(device) - before
    else:
        from autoplan.profile.memory import LiveTensorTracker
        existing = [*case.module.parameters(), *case.inputs,
                    *([case.upstream_grad] if case.upstream_grad is not None else [])]
        with LiveTensorTracker(existing) as tracker:
            before = tracker.current_bytes
            root, out = case.forward()
            tracker.refresh()
            kept = tracker.current_bytes - before
    out_bytes = out.untyped_storage().nbytes()
    loss_bytes = root.untyped_storage().nbytes() if root is not out else 0
    del root, out
    return max(0, kept - out_bytes - loss_bytes)


def measure_selective(case: LayerCase, settings: TimingSettings) -> tuple[int, float]:
    """(bytes kept from forward to backward, forward+backward seconds) of ``case``'s module under the
    executor's selective recomputation (:func:`autoplan.models.recompute.wrap_block`). The kept
    bytes count the layer's input, which a checkpoint always keeps (as ``saved_activation_bytes``
    counts an input the layer saves). The forward counts too: the op-level policy sees every op of it
    (a dispatch mode), which on small CPU blocks costs as much as the recomputation in backward."""
    from autoplan.models.recompute import wrap_block
    wrapped = replace(case, module=wrap_block(case.module, "selective"))
    fwd_s, bwd_s = time_forward_backward(wrapped, settings)
    inputs = sum(x.untyped_storage().nbytes() for x in case.inputs if x.is_floating_point())
    return retained_bytes(wrapped) + inputs, fwd_s + bwd_s


def measure_case(case: LayerCase, settings: TimingSettings, *, mbs: int, tp: int,
                 selective: bool = False) -> LayerTiming:
    """Every figure of one layer case: forward/backward time, saved-activation and output bytes;
    with ``selective`` (blocks) also the kept bytes and backward time under selective recomputation."""
    fwd_s, bwd_s = time_forward_backward(case, settings)
    holder: dict[str, torch.Tensor] = {}

    def run() -> torch.Tensor:
        root, out = case.forward()
        holder["out"] = out
        return root
    saved = saved_activation_bytes(run, list(case.module.parameters()))
    out_bytes = holder["out"].numel() * holder["out"].element_size()
    holder.clear()
    sel_bytes, sel_s = measure_selective(case, settings) if selective else (None, fwd_s + bwd_s)
    return LayerTiming(mbs=mbs, tp=tp, forward_s=fwd_s, backward_s=bwd_s, saved_activation_bytes=saved,
                       output_bytes=out_bytes, saved_activation_bytes_selective=sel_bytes,
                       selective_recompute_s=max(0.0, sel_s - fwd_s - bwd_s))


def optimizer_step_s_per_param(params: list[torch.Tensor], make_optimizer: Callable[[list], torch.optim.Optimizer],
                               settings: TimingSettings) -> float:
    """Median seconds of one ``step()`` of the optimizer over ``params`` (given random
    gradients), divided by the number of parameter elements."""
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = make_optimizer(params)
    clock = Clock(settings.device)
    warm: list[float] = []
    for _ in range(max(1, settings.warmup)):
        with clock.measure(warm):
            opt.step()
    inner = inner_iterations(min(warm), settings)
    return median_per_call(opt.step, inner, settings.repeats, clock) / sum(p.numel() for p in params)


def measure_optimizers(shape: ModelShape, device: torch.device, dtype: torch.dtype,
                        settings: TimingSettings, min_params: int) -> tuple[float, float]:
    """(AdamW, SGD) seconds per parameter per step, over enough copies of a block's parameters
    to hold ``min_params`` elements."""
    per_block = shape.block_param_count()
    copies = max(1, math.ceil(min_params / per_block))
    params = [p.detach().clone().requires_grad_(True)
              for _ in range(copies) for p in Block(shape).to(device=device, dtype=dtype).parameters()]
    adamw = optimizer_step_s_per_param(params, lambda ps: torch.optim.AdamW(ps, lr=1e-4), settings)
    sgd = optimizer_step_s_per_param(params, lambda ps: torch.optim.SGD(ps, lr=1e-4), settings)
    return adamw, sgd


def measure_optimizers_over(template: list[torch.Tensor], settings: TimingSettings,
                             min_params: int) -> tuple[float, float]:
    """(AdamW, SGD) seconds per parameter per step over copies of ``template`` (at least ``min_params``)."""
    per_copy = max(1, sum(p.numel() for p in template))
    copies = max(1, math.ceil(min_params / per_copy))
    params = [p.clone().requires_grad_(True) for _ in range(copies) for p in template]
    adamw = optimizer_step_s_per_param(params, lambda ps: torch.optim.AdamW(ps, lr=1e-4), settings)
    sgd = optimizer_step_s_per_param(params, lambda ps: torch.optim.SGD(ps, lr=1e-4), settings)
    return adamw, sgd
