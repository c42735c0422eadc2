"""Measure a model's layers: forward/backward time, parameter and activation bytes.

Each layer *kind* is measured once (``embed``, ``block``, ``head``; every ``block.i`` is the same
module, so its figures are shared), at every requested micro-batch size and TP degree::

    kind   input                      measured module
    embed  tokens [b, s] int64        nn.Embedding(vocab, h)                      -> x [b, s, h]
    block  x [b, s, h]                Block with heads/t, kv_heads/t, ffn/t       -> x [b, s, h]
    head   x [b, s, h], targets [b,s] Head + cross-entropy loss                   -> logits [b, s, V]

What each figure means:

- ``forward_s``: median wall time of the module's forward with autograd recording.
- ``backward_s``: median wall time of ``torch.autograd.backward`` alone (the forward is re-run,
  untimed, before each sample).  ``embed`` and ``block`` are driven by a fixed random upstream
  gradient of the output's shape; ``head`` by its scalar loss, because the last pipeline stage runs
  the loss and its fp32 log-softmax is a large saved tensor for a big vocabulary.
- ``saved_activation_bytes_selective`` and ``selective_recompute_s`` (blocks): the bytes kept and the
  backward time added under the executor's selective recomputation (its own checkpoint wrapper,
  :mod:`autoplan.models.recompute`; the backward under it minus the plain one), the bytes counted
  by the allocator (:func:`retained_bytes`; a checkpoint keeps what it saves outside autograd's
  hooks). The planner takes selective recomputation's saving and cost from them:
  with a fused attention (SDPA, on CPU and CUDA) no s x s scores are ever stored, so the shape's
  rule (selective drops the 5as/h term) would not say what this executor saves.
- ``saved_activation_bytes``: bytes autograd holds for backward, seen through
  ``torch.autograd.graph.saved_tensors_hooks``: unique storages (views of one storage count once,
  the whole storage is counted because the whole storage stays alive), parameters excluded.
  The layer's input counts when the layer saves it (a norm does).
- ``output_bytes``: bytes of the module's output (for ``head``: the logits).
- TP degree ``t > 1``: the compute of ONE tensor-parallel rank, no communication: the block's
  column-parallel projections (``TP_COLWISE``) keep ``out/t`` features, the row-parallel ones
  (``TP_ROWWISE``) ``in/t``.  The norms stay whole: this is TP *without* sequence parallel.
  ``embed`` and ``head`` are not sharded (``tp_shardable=False``) and are measured at t=1 only.
- ``optimizer_step_s_per_param`` (AdamW) and ``optimizer_step_s_per_param_sgd``: the median time of
  one ``step()`` over copies of a block's parameters (at least ``optimizer_min_params`` in all, so
  the per-call overhead is amortised as it is for a real model), divided by the parameter count.

Precision (``precision``, recorded in the profile) is measured the way the executor trains
(:mod:`autoplan.execute.apply`): ``fp32`` plainly; ``bf16`` / ``fp16`` as mixed precision, with fp32
parameters (the master weights the optimizer steps, so ``param_bytes`` is 4 per parameter and the
optimizer is timed on fp32) and each forward under ``torch.autocast`` to the 16-bit type, so matrix
products run in 16 bits, norms and the loss in fp32, and the residual stream between blocks stays
fp32 (what a pipeline cut sends under autocast).  The 16-bit copies autocast makes of the weights
are not activations (one per parameter per step, whatever the micro-batch size: the planner counts
them with the parameters), so ``saved_activation_bytes`` leaves out every saved tensor computed
from parameters alone (:func:`is_parameter_copy`).  Under FSDP2's ``MixedPrecisionPolicy`` (the
executor's ``fully_shard`` layouts) the parameters themselves are gathered in 16 bits and the
residual stream is 16-bit too: that saves somewhat fewer bytes (gpt-small's block: 2.9 MB against
3.2 MB under autocast at mbs 2), so the autocast figure is an upper bound there.

Timing is made robust on a small, noisy machine by: a fixed thread count during measurement
(``threads``), warm-up iterations, ``repeats`` samples and their median, and several iterations
per sample when one iteration is shorter than ``min_sample_s``.  On CUDA the device is
synchronised and CUDA events time the work.

Run::

    python -c "from autoplan.profile.layers import profile_model; print(profile_model('gpt-tiny').to_dict())"
"""

from __future__ import annotations

import contextlib
import copy
import gc
import math
import platform
import socket
import statistics
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from autoplan.errors import InputError
from autoplan.models.registry import (
    UnitKind,
    build_model_from_spec,
    is_unit_model_spec,
    model_seq_len,
    model_tp_plan,
    model_vocab,
    sample_tokens,
    tp_divisors_ok,
    tp_rank_unit,
    unit_inputs,
    unit_kinds,
)
from autoplan.models.shapes import BUILTIN_SHAPES, ModelShape, resolve_shape
from autoplan.models.units import unit_module
from autoplan.models.transformer import TP_COLWISE, TP_ROWWISE, Block, Head, tp_degrees_allowed
from autoplan.profile.analytic import forward_flops_per_sample, layer_chain
from autoplan.profile.formats import LayerInfo, LayerKindProfile, LayerTiming, ModelProfile

LAYER_KINDS = ("embed", "block", "head")
PRECISION_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def training_dtypes(precision: str) -> tuple[torch.dtype, torch.dtype | None]:
    """(parameter dtype, autocast dtype or None) of training in ``precision``, as the executor
    trains: fp32 parameters always; bf16/fp16 compute under autocast."""
    if precision not in PRECISION_DTYPES:
        raise InputError(f"unknown precision {precision!r} (known: {', '.join(PRECISION_DTYPES)})")
    low = PRECISION_DTYPES[precision]
    return torch.float32, (None if low == torch.float32 else low)


def default_precision(device: str) -> str:
    """bf16 on CUDA (mixed precision, what GPUs train in), fp32 elsewhere."""
    return "bf16" if str(device).startswith("cuda") else "fp32"


@dataclass(frozen=True)
class ProgressEvent:
    """One finished measurement, for a progress bar (``done`` of ``total``)."""

    what: str
    """what was just measured, e.g. ``"block mbs=2 tp=1"``"""
    done: int
    total: int


ProgressCallback = Callable[[ProgressEvent], None]


@dataclass(frozen=True)
class TimingSettings:
    """How one figure is timed."""

    device: torch.device
    warmup: int
    """untimed iterations before the samples"""
    repeats: int
    """timed samples; the figure is their median"""
    min_sample_s: float = 2e-3
    """a sample runs several iterations (and divides) when one is shorter than this"""
    max_inner: int = 64
    """at most this many iterations per sample"""


# --------------------------------------------------------------------------------------------
# building the measured modules
# --------------------------------------------------------------------------------------------

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
class _LayerCase:
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


def _make_case(kind: str, shape: ModelShape, tp: int, mbs: int, seq_len: int, device: torch.device,
               dtype: torch.dtype, seed: int = 0, autocast_dtype: torch.dtype | None = None) -> _LayerCase:
    """``kind`` on inputs of ``mbs`` sequences; parameters and floating inputs in ``dtype`` (fp32 under
    mixed precision), each forward under autocast to ``autocast_dtype`` when given."""
    case = _make_plain_case(kind, shape, tp, mbs, seq_len, device, dtype, seed)
    case.autocast_dtype = autocast_dtype
    return case


def _make_plain_case(kind: str, shape: ModelShape, tp: int, mbs: int, seq_len: int, device: torch.device,
                     dtype: torch.dtype, seed: int) -> _LayerCase:
    torch.manual_seed(seed)
    module = build_layer(kind, shape, tp).to(device=device, dtype=dtype)
    g = torch.Generator(device="cpu").manual_seed(seed)
    if kind == "embed":
        tokens = torch.randint(shape.vocab, (mbs, seq_len), generator=g).to(device)   # [b, s]
        grad = torch.randn(mbs, seq_len, shape.hidden, generator=g).to(device=device, dtype=dtype)
        return _LayerCase(module, (tokens,), grad)
    x = torch.randn(mbs, seq_len, shape.hidden, generator=g).to(device=device, dtype=dtype)
    x.requires_grad_(True)                                       # a pipeline stage needs dL/dx
    if kind == "head":
        targets = torch.randint(shape.vocab, (mbs, seq_len), generator=g).to(device)
        return _LayerCase(module, (x, targets), None)
    grad = torch.randn(mbs, seq_len, shape.hidden, generator=g).to(device=device, dtype=dtype)
    return _LayerCase(module, (x,), grad)


# --------------------------------------------------------------------------------------------
# the measurements (each a small function, usable on any module)
# --------------------------------------------------------------------------------------------

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
    del result, keep_alive
    return sum(storages.values())


class _Clock:
    """Wall time of a piece of work on ``device`` (CUDA events and a synchronise on GPUs)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    @contextlib.contextmanager
    def measure(self, out: list[float]) -> Iterator[None]:
        """Append the elapsed seconds of the ``with`` body to ``out``."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.sync()
            start.record()
            yield
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            yield
            out.append(time.perf_counter() - t0)


@contextlib.contextmanager
def _quiet_process(threads: int | None) -> Iterator[int]:
    """Fix torch's intra-op thread count and pause the garbage collector while measuring;
    both are restored afterwards.  Yields the thread count in force."""
    old_threads = torch.get_num_threads()
    gc_was_enabled = gc.isenabled()
    if threads is not None:
        if threads < 1:
            raise InputError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    gc.collect()
    gc.disable()
    try:
        yield torch.get_num_threads()
    finally:
        if gc_was_enabled:
            gc.enable()
        torch.set_num_threads(old_threads)


def _inner_iterations(one_iteration_s: float, settings: TimingSettings) -> int:
    if one_iteration_s <= 0:
        return settings.max_inner
    return max(1, min(settings.max_inner, math.ceil(settings.min_sample_s / one_iteration_s)))


def _median_per_call(call: Callable[[], object], inner: int, repeats: int, clock: _Clock) -> float:
    """Median over ``repeats`` samples of (time of ``inner`` back-to-back calls) / inner."""
    samples: list[float] = []
    for _ in range(repeats):
        one: list[float] = []
        with clock.measure(one):
            for _ in range(inner):
                call()      # a forward's result is dropped at once: its graph is freed as in training
        samples.append(one[0] / inner)
    return statistics.median(samples)


def time_forward_backward(case: _LayerCase, settings: TimingSettings) -> tuple[float, float]:
    """(median forward seconds, median backward seconds) of one layer case."""
    clock = _Clock(settings.device)
    fwd_warm: list[float] = []
    bwd_warm: list[float] = []
    for _ in range(max(1, settings.warmup)):
        with clock.measure(fwd_warm):
            root, _ = case.forward()
        with clock.measure(bwd_warm):
            case.backward(root)
        del root
    fwd_inner = _inner_iterations(min(fwd_warm), settings)
    bwd_inner = _inner_iterations(min(bwd_warm), settings)

    forward_s = _median_per_call(case.forward, fwd_inner, settings.repeats, clock)

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


def retained_bytes(case: _LayerCase) -> int:
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


def measure_selective(case: _LayerCase, settings: TimingSettings) -> tuple[int, float]:
    """(bytes kept from forward to backward, backward seconds) of ``case``'s module under the
    executor's selective recomputation (:func:`autoplan.models.recompute.wrap_block`). The kept
    bytes count the layer's input, which a checkpoint always keeps (as ``saved_activation_bytes``
    counts an input the layer saves)."""
    from autoplan.models.recompute import wrap_block
    wrapped = replace(case, module=wrap_block(case.module, "selective"))
    _, bwd_s = time_forward_backward(wrapped, settings)
    inputs = sum(x.untyped_storage().nbytes() for x in case.inputs if x.is_floating_point())
    return retained_bytes(wrapped) + inputs, bwd_s


def measure_case(case: _LayerCase, settings: TimingSettings, *, mbs: int, tp: int,
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
    del holder
    sel_bytes, sel_bwd_s = measure_selective(case, settings) if selective else (None, bwd_s)
    return LayerTiming(mbs=mbs, tp=tp, forward_s=fwd_s, backward_s=bwd_s, saved_activation_bytes=saved,
                       output_bytes=out_bytes, saved_activation_bytes_selective=sel_bytes,
                       selective_recompute_s=max(0.0, sel_bwd_s - bwd_s))


def optimizer_step_s_per_param(params: list[torch.Tensor], make_optimizer: Callable[[list], torch.optim.Optimizer],
                               settings: TimingSettings) -> float:
    """Median seconds of one ``step()`` of the optimizer over ``params`` (given random
    gradients), divided by the number of parameter elements."""
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = make_optimizer(params)
    clock = _Clock(settings.device)
    warm: list[float] = []
    for _ in range(max(1, settings.warmup)):
        with clock.measure(warm):
            opt.step()
    inner = _inner_iterations(min(warm), settings)
    return _median_per_call(opt.step, inner, settings.repeats, clock) / sum(p.numel() for p in params)


# --------------------------------------------------------------------------------------------
# orchestration
# --------------------------------------------------------------------------------------------

def device_name(device: torch.device) -> str:
    """A readable name of the device (the CPU model, or the CUDA device name)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _resolve_device(device: str) -> torch.device:
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise InputError(f"bad device {device!r}: {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} asked for, but CUDA is not available in this torch")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"device {device!r}: only cpu and cuda are supported")
    return dev


def resolve_model_shape(spec: str) -> ModelShape:
    """A built-in shape name or a transformer-shape JSON file; InputError otherwise."""
    shape = resolve_shape(spec)
    if shape is None:
        raise InputError(f"cannot profile model {spec!r}: not a built-in name ({', '.join(BUILTIN_SHAPES)}) "
                         f"nor a transformer shape .json file")
    return shape


def _check_positive_ints(name: str, values: tuple[int, ...] | list[int]) -> list[int]:
    vals = sorted(set(values))
    if not vals or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in vals):
        raise InputError(f"{name} must be a non-empty list of positive integers, got {list(values)!r}")
    return vals


def _check_settings(device: str, precision: str, mbs_list: tuple[int, ...], tp_list: tuple[int, ...], warmup: int,
                    repeats: int) -> tuple[torch.device, torch.dtype, list[int], list[int]]:
    """(device, parameter dtype, sorted micro-batch sizes, sorted TP degrees with 1 always in);
    InputError on bad values."""
    dev = _resolve_device(device)
    param_dtype, _ = training_dtypes(precision)
    mbs_vals = _check_positive_ints("mbs_list", mbs_list)
    tp_vals = _check_positive_ints("tp_list", tp_list)
    if 1 not in tp_vals:
        tp_vals = [1] + tp_vals                  # t=1 is always needed (embed, head, param counts)
    if warmup < 0 or repeats < 1:
        raise InputError(f"warmup must be >= 0 and repeats >= 1 (got {warmup}, {repeats})")
    return dev, param_dtype, mbs_vals, tp_vals


def _environment(dev: torch.device, n_threads: int, warmup: int, repeats: int, **extra: object) -> dict:
    """Where and how a model profile was measured."""
    return {"torch": torch.__version__, "python": platform.python_version(),
            "device": device_name(dev), "device_type": dev.type, "threads": n_threads,
            "hostname": socket.gethostname(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "warmup": warmup, "repeats": repeats, "statistic": "median",
            "tp_measurement": "one TP rank's compute, no communication, no sequence parallel", **extra}


def _precision_note(precision: str) -> str:
    if training_dtypes(precision)[1] is None:
        return "fp32 parameters and compute"
    return (f"mixed precision as the executor trains: fp32 parameters, forward under torch.autocast({precision}); "
            f"autocast's {precision} weight copies are not counted as activations")


def profile_model(spec: str, *, mbs_list: tuple[int, ...] = (1, 2, 4), tp_list: tuple[int, ...] = (1,),
                  seq_len: int | None = None, device: str = "cpu", warmup: int = 2, repeats: int = 5,
                  threads: int | None = None, precision: str = "fp32", optimizer_min_params: int = 1 << 21,
                  progress: ProgressCallback | None = None) -> ModelProfile:
    """Measure ``spec`` (a built-in shape name or a shape JSON) layer kind by layer kind.

    ``mbs_list`` micro-batch sizes and ``tp_list`` TP degrees are measured for the block (embed
    and head at t=1 only); ``seq_len`` defaults to the shape's; ``threads`` fixes torch's thread
    count while measuring (default: leave it); ``precision`` is the training precision, measured as
    the executor trains it (module docstring; default: fp32, bf16 for CUDA on the command line); ``progress`` is called after each measured (kind, mbs, tp) and
    after the optimizer measurement.

    ``hf:NAME`` and ``path/file.py:factory`` specs are built and measured unit kind by unit kind
    (:func:`profile_unit_model`)."""
    if is_unit_model_spec(spec):
        return profile_unit_model(spec, mbs_list=mbs_list, tp_list=tp_list, seq_len=seq_len, device=device,
                                  warmup=warmup, repeats=repeats, threads=threads, precision=precision,
                                  optimizer_min_params=optimizer_min_params, progress=progress)
    shape = resolve_model_shape(spec)
    dev, dtype, mbs_vals, tp_vals = _check_settings(device, precision, mbs_list, tp_list, warmup, repeats)
    autocast = training_dtypes(precision)[1]
    for t in tp_vals:
        check_tp_degree(shape, t)
    s = shape.seq_len if seq_len is None else seq_len
    if not isinstance(s, int) or s < 1:
        raise InputError(f"seq_len must be a positive integer, got {s!r}")
    settings = TimingSettings(device=dev, warmup=warmup, repeats=repeats)

    points = [(kind, mbs, tp) for kind in LAYER_KINDS for tp in tp_vals for mbs in mbs_vals
              if kind == "block" or tp == 1]
    total = len(points) + 1
    kinds: dict[str, LayerKindProfile] = {}
    with _quiet_process(threads) as n_threads:
        for done, (kind, mbs, tp) in enumerate(points, start=1):
            case = _make_case(kind, shape, tp, mbs, s, dev, dtype, autocast_dtype=autocast)
            timing = measure_case(case, settings, mbs=mbs, tp=tp, selective=(kind == "block"))
            if kind not in kinds:
                full = case.module if tp == 1 else build_layer(kind, shape, 1)
                kinds[kind] = LayerKindProfile(
                    param_count=sum(p.numel() for p in full.parameters()),
                    param_bytes=sum(p.numel() for p in full.parameters()) * torch.empty((), dtype=dtype).element_size(),
                    tp_shardable=(kind == "block"), timings=[],
                    flops_per_sample=forward_flops_per_sample(kind, shape, s))
            kinds[kind].timings.append(timing)
            if progress is not None:
                progress(ProgressEvent(what=f"{kind} mbs={mbs} tp={tp}", done=done, total=total))

        adamw_s, sgd_s = _measure_optimizers(shape, dev, dtype, settings, optimizer_min_params)
        if progress is not None:
            progress(ProgressEvent(what="optimizer step", done=total, total=total))

    layers, edges = layer_chain(shape)
    environment = _environment(dev, n_threads, warmup, repeats, precision_measurement=_precision_note(precision),
                               head_measurement="Head + cross-entropy loss, backward from the loss")
    return ModelProfile(model_spec=spec, shape=shape.to_dict(), precision=precision, seq_len=s,
                        layers=layers, edges=edges, kinds=kinds, environment=environment,
                        optimizer_step_s_per_param=adamw_s, optimizer_step_s_per_param_sgd=sgd_s,
                        source="measured")


def _measure_optimizers(shape: ModelShape, device: torch.device, dtype: torch.dtype,
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


# --------------------------------------------------------------------------------------------
# any unit model (hf:NAME, path/file.py:factory)
# --------------------------------------------------------------------------------------------

def _unit_case(model: nn.Module, kind: UnitKind, tp: int, inputs: torch.Tensor, vocab: int,
               device: torch.device, dtype: torch.dtype, seed: int = 0,
               autocast_dtype: torch.dtype | None = None) -> _LayerCase:
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
        return _LayerCase(module, (x, targets), None, with_loss=True, autocast_dtype=autocast_dtype)
    with torch.no_grad(), torch.autocast(device.type, dtype=autocast_dtype or torch.float32,
                                         enabled=autocast_dtype is not None):
        out = module(x)
    grad = torch.randn(out.shape, generator=g).to(device=device, dtype=out.dtype)
    return _LayerCase(module, (x,), grad, autocast_dtype=autocast_dtype)


def profile_unit_model(spec: str, *, mbs_list: tuple[int, ...] = (1, 2, 4), tp_list: tuple[int, ...] = (1,),
                       seq_len: int | None = None, device: str = "cpu", warmup: int = 2, repeats: int = 5,
                       threads: int | None = None, precision: str = "fp32", optimizer_min_params: int = 1 << 21,
                       progress: ProgressCallback | None = None, seed: int = 0) -> ModelProfile:
    """Measure any unit model (built by :func:`autoplan.models.registry.build_model_from_spec`).

    Units that are structurally equal are one kind, measured once on the first of them
    (:func:`autoplan.models.registry.unit_kinds`: ``embed``, ``head``, ``block``, ``block_1``, ...);
    each is fed the input it really receives in the model (tokens for the first unit); the last unit
    is measured with the token cross-entropy of its output (as ``head`` is). TP degrees > 1 are
    measured for blocks that hold every layer of the model's ``tp_plan`` (one rank's slices, see
    :func:`autoplan.models.registry.tp_rank_unit`); a TP degree that does not divide the heads or a
    TP layer's split dimension is an InputError. The profile records ``spec`` and, for models with
    a transformer shape (``hf:``), that shape, so the planner can check TP degrees."""
    dev, dtype, mbs_vals, tp_vals = _check_settings(device, precision, mbs_list, tp_list, warmup, repeats)
    autocast = training_dtypes(precision)[1]
    model = build_model_from_spec(spec, None, seed).eval()    # eval: no dropout while measuring
    vocab, max_s = model_vocab(model), model_seq_len(model)
    s = max_s if seq_len is None else seq_len
    if not isinstance(s, int) or not 1 <= s <= max_s:
        raise InputError(f"seq_len must be an integer in 1..{max_s} (the model's seq_len), got {s!r}")
    kinds_list = unit_kinds(model)
    shardable = [k for k in kinds_list if k.tp_shardable]
    for t in tp_vals:
        if t > 1 and (not shardable or not all(tp_divisors_ok(model, k, t) for k in shardable)):
            raise InputError(f"TP degree {t} is not possible for {spec!r}: "
                             + ("the model has no tp_plan its blocks hold" if not shardable else
                                "it does not divide the heads or the split width of a TP layer"))
    settings = TimingSettings(device=dev, warmup=warmup, repeats=repeats)
    points = [(kind, mbs, tp) for kind in kinds_list for tp in tp_vals for mbs in mbs_vals
              if kind.tp_shardable or tp == 1]
    total = len(points) + 1
    measured_units = [k.units[0] for k in kinds_list]
    inputs_by_mbs = {mbs: unit_inputs(model, measured_units, sample_tokens(vocab, mbs, s, seed))
                     for mbs in mbs_vals}
    shape = getattr(model, "shape", None)
    elem = torch.empty((), dtype=dtype).element_size()
    kinds: dict[str, LayerKindProfile] = {}
    with _quiet_process(threads) as n_threads:
        for done, (kind, mbs, tp) in enumerate(points, start=1):
            case = _unit_case(model, kind, tp, inputs_by_mbs[mbs][kind.units[0]], vocab, dev, dtype, seed, autocast)
            timing = measure_case(case, settings, mbs=mbs, tp=tp, selective=kind.tp_shardable)
            if kind.name not in kinds:
                n_params = sum(p.numel() for p in unit_module(model, kind.units[0]).parameters())
                flops = forward_flops_per_sample(kind.name, shape, s) \
                    if isinstance(shape, ModelShape) and kind.name in LAYER_KINDS else 0.0
                kinds[kind.name] = LayerKindProfile(param_count=n_params, param_bytes=n_params * elem,
                                                    tp_shardable=kind.tp_shardable, timings=[],
                                                    flops_per_sample=flops)
            kinds[kind.name].timings.append(timing)
            if progress is not None:
                progress(ProgressEvent(what=f"{kind.name} mbs={mbs} tp={tp}", done=done, total=total))

        biggest = max(kinds_list, key=lambda k: sum(p.numel() for p in unit_module(model, k.units[0]).parameters()))
        template = [p.detach().to(device=dev, dtype=dtype) for p in unit_module(model, biggest.units[0]).parameters()]
        adamw_s, sgd_s = _measure_optimizers_over(template, settings, optimizer_min_params)
        if progress is not None:
            progress(ProgressEvent(what="optimizer step", done=total, total=total))

    kind_of = {u: k.name for k in kinds_list for u in k.units}
    layers = [LayerInfo(name, kind_of[name]) for name in model.unit_names()]
    edges = [(a.name, b.name) for a, b in zip(layers, layers[1:])]
    environment = _environment(dev, n_threads, warmup, repeats, model_class=type(model).__name__,
                               precision_measurement=_precision_note(precision),
                               kinds={k.name: list(k.units) for k in kinds_list},
                               head_measurement="last unit + cross-entropy loss, backward from the loss")
    shape_dict = None
    if isinstance(shape, ModelShape):
        shape_dict = {**shape.to_dict(), "seq_len": s}
    return ModelProfile(model_spec=spec, shape=shape_dict, precision=precision, seq_len=s,
                        layers=layers, edges=edges, kinds=kinds, environment=environment,
                        optimizer_step_s_per_param=adamw_s, optimizer_step_s_per_param_sgd=sgd_s,
                        source="measured")


def _measure_optimizers_over(template: list[torch.Tensor], settings: TimingSettings,
                             min_params: int) -> tuple[float, float]:
    """(AdamW, SGD) seconds per parameter per step over copies of ``template`` (at least ``min_params``)."""
    per_copy = max(1, sum(p.numel() for p in template))
    copies = max(1, math.ceil(min_params / per_copy))
    params = [p.clone().requires_grad_(True) for _ in range(copies) for p in template]
    adamw = optimizer_step_s_per_param(params, lambda ps: torch.optim.AdamW(ps, lr=1e-4), settings)
    sgd = optimizer_step_s_per_param(params, lambda ps: torch.optim.SGD(ps, lr=1e-4), settings)
    return adamw, sgd
