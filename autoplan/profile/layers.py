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
  time added under the executor's selective recomputation (its own checkpoint wrapper,
  :mod:`autoplan.models.recompute`; forward+backward under it minus the plain ones), the bytes counted
  by the allocator (:func:`~autoplan.profile.layer_figures.retained_bytes`; a checkpoint keeps
  what it saves outside autograd's hooks). The planner takes selective recomputation's saving and cost from them:
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
from parameters alone (:func:`~autoplan.profile.layer_figures.is_parameter_copy`).  Under FSDP2's
``MixedPrecisionPolicy`` (the executor's ``fully_shard`` layouts) the parameters themselves are
gathered in 16 bits and the residual stream is 16-bit too: that saves somewhat fewer bytes (gpt-small's block: 2.9 MB against
3.2 MB under autocast at mbs 2), so the autocast figure is an upper bound there.

The modules measured are built in :mod:`autoplan.profile.layer_cases`, the figures measured in
:mod:`autoplan.profile.layer_figures`. Timing (:mod:`autoplan.profile.timing`) is made robust on a
small, noisy machine by: a fixed thread count during measurement
(``threads``), warm-up iterations, ``repeats`` samples and their median, and several iterations
per sample when one iteration is shorter than ``min_sample_s``.  On CUDA the device is
synchronised and CUDA events time the work.

Run::

    python -c "from autoplan.profile.layers import profile_model; print(profile_model('gpt-tiny').to_dict())"
"""

from __future__ import annotations

import platform
import socket
from datetime import datetime, timezone

import torch

from autoplan.errors import InputError
from autoplan.models.registry import (
    model_seq_len,
    model_vocab,
    sample_tokens,
    tp_divisors_ok,
    unit_inputs,
    unit_kinds,
)
from autoplan.models.shapes import BUILTIN_SHAPES, ModelShape, forward_flops_per_sample
from autoplan.models.source import ModelSource, as_model_source
from autoplan.models.units import unit_module
from autoplan.profile.analytic import layer_chain
from autoplan.profile.formats import LayerInfo, LayerKindProfile, ModelProfile, fp8_not_measured, is_fp8
from autoplan.profile.layer_cases import LAYER_KINDS, build_layer, check_tp_degree, make_case, unit_case
from autoplan.profile.layer_figures import measure_case, measure_optimizers, measure_optimizers_over
from autoplan.profile.timing import (ProgressCallback, ProgressEvent, TimingSettings, device_name, quiet_process,
                                     resolve_device)

PRECISION_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def training_dtypes(precision: str) -> tuple[torch.dtype, torch.dtype | None]:
    """(parameter dtype, autocast dtype or None) of training in ``precision``, as the executor
    trains: fp32 parameters always; bf16/fp16 compute under autocast."""
    if is_fp8(precision):
        raise InputError(fp8_not_measured(precision))
    if precision not in PRECISION_DTYPES:
        raise InputError(f"unknown precision {precision!r} (known: {', '.join(PRECISION_DTYPES)})")
    low = PRECISION_DTYPES[precision]
    return torch.float32, (None if low == torch.float32 else low)


def default_precision(device: str) -> str:
    """bf16 on CUDA (mixed precision, what GPUs train in), fp32 elsewhere."""
    return "bf16" if str(device).startswith("cuda") else "fp32"


# --------------------------------------------------------------------------------------------
# building the measured modules
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# the measurements (each a small function, usable on any module)
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# orchestration
# --------------------------------------------------------------------------------------------


def _check_positive_ints(name: str, values: tuple[int, ...] | list[int]) -> list[int]:
    vals = sorted(set(values))
    if not vals or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in vals):
        raise InputError(f"{name} must be a non-empty list of positive integers, got {list(values)!r}")
    return vals


def _check_settings(device: str, precision: str, mbs_list: tuple[int, ...], tp_list: tuple[int, ...], warmup: int,
                    repeats: int) -> tuple[torch.device, torch.dtype, list[int], list[int]]:
    """(device, parameter dtype, sorted micro-batch sizes, sorted TP degrees with 1 always in);
    InputError on bad values."""
    dev = resolve_device(device)
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


def profile_model(model: str | ModelSource, *, mbs_list: tuple[int, ...] = (1, 2, 4), tp_list: tuple[int, ...] = (1,),
                  seq_len: int | None = None, device: str = "cpu", warmup: int = 2, repeats: int = 5,
                  threads: int | None = None, precision: str = "fp32", optimizer_min_params: int = 1 << 21,
                  progress: ProgressCallback | None = None) -> ModelProfile:
    """Measure ``model`` (a spec or a resolved :class:`~autoplan.models.source.ModelSource`: a built-in
    shape name or a shape JSON) layer kind by layer kind.

    ``mbs_list`` micro-batch sizes and ``tp_list`` TP degrees are measured for the block (embed
    and head at t=1 only); ``seq_len`` defaults to the shape's; ``threads`` fixes torch's thread
    count while measuring (default: leave it); ``precision`` is the training precision, measured as
    the executor trains it (module docstring; default: fp32, bf16 for CUDA on the command line);
    ``progress`` is called after each measured (kind, mbs, tp) and after the optimizer measurement.

    ``hf:NAME`` and ``path/file.py:factory`` specs are built and measured unit kind by unit kind
    (:func:`profile_unit_model`)."""
    source = as_model_source(model)
    if source.built_per_unit:
        return profile_unit_model(source, mbs_list=mbs_list, tp_list=tp_list, seq_len=seq_len, device=device,
                                  warmup=warmup, repeats=repeats, threads=threads, precision=precision,
                                  optimizer_min_params=optimizer_min_params, progress=progress)
    shape = source.shape
    if shape is None:
        raise InputError(f"cannot profile model {source.spec!r}: not a built-in name ({', '.join(BUILTIN_SHAPES)}) "
                         f"nor a transformer shape .json file")
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
    with quiet_process(threads) as n_threads:
        for done, (kind, mbs, tp) in enumerate(points, start=1):
            case = make_case(kind, shape, tp, mbs, s, dev, dtype, autocast_dtype=autocast)
            timing = measure_case(case, settings, mbs=mbs, tp=tp, selective=(kind == "block"))
            if kind not in kinds:
                full = case.module if tp == 1 else build_layer(kind, shape, 1)
                kinds[kind] = LayerKindProfile(
                    param_count=sum(p.numel() for p in full.parameters()),
                    param_bytes=sum(p.numel() for p in full.parameters()) * torch.empty((), dtype=dtype).element_size(),
                    tp_shardable=(kind == "block"), timings=[],
                    flops_per_sample=source.forward_flops_per_sample(kind, s))
            kinds[kind].timings.append(timing)
            if progress is not None:
                progress(ProgressEvent(what=f"{kind} mbs={mbs} tp={tp}", done=done, total=total))

        adamw_s, sgd_s = measure_optimizers(shape, dev, dtype, settings, optimizer_min_params)
        if progress is not None:
            progress(ProgressEvent(what="optimizer step", done=total, total=total))

    layers, edges = layer_chain(shape)
    environment = _environment(dev, n_threads, warmup, repeats, precision_measurement=_precision_note(precision),
                               head_measurement="Head + cross-entropy loss, backward from the loss")
    return ModelProfile(model_spec=source.spec, shape=shape.to_dict(), precision=precision, seq_len=s,
                        layers=layers, edges=edges, kinds=kinds, environment=environment,
                        optimizer_step_s_per_param=adamw_s, optimizer_step_s_per_param_sgd=sgd_s,
                        source="measured")


# --------------------------------------------------------------------------------------------
# any unit model (hf:NAME, path/file.py:factory)
# --------------------------------------------------------------------------------------------


def profile_unit_model(model: str | ModelSource, *, mbs_list: tuple[int, ...] = (1, 2, 4),
                       tp_list: tuple[int, ...] = (1,), seq_len: int | None = None, device: str = "cpu",
                       warmup: int = 2, repeats: int = 5,
                       threads: int | None = None, precision: str = "fp32", optimizer_min_params: int = 1 << 21,
                       progress: ProgressCallback | None = None, seed: int = 0) -> ModelProfile:
    """Measure any unit model (``model`` a spec or a resolved :class:`~autoplan.models.source.ModelSource`,
    built by :meth:`~autoplan.models.source.ModelSource.build`).

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
    source = as_model_source(model)
    model = source.build(seed).eval()    # eval: no dropout while measuring
    vocab, max_s = model_vocab(model), model_seq_len(model)
    s = max_s if seq_len is None else seq_len
    if not isinstance(s, int) or not 1 <= s <= max_s:
        raise InputError(f"seq_len must be an integer in 1..{max_s} (the model's seq_len), got {s!r}")
    kinds_list = unit_kinds(model)
    shardable = [k for k in kinds_list if k.tp_shardable]
    for t in tp_vals:
        if t > 1 and (not shardable or not all(tp_divisors_ok(model, k, t) for k in shardable)):
            raise InputError(f"TP degree {t} is not possible for {source.spec!r}: "
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
    with quiet_process(threads) as n_threads:
        for done, (kind, mbs, tp) in enumerate(points, start=1):
            case = unit_case(model, kind, tp, inputs_by_mbs[mbs][kind.units[0]], vocab, dev, dtype, seed, autocast)
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
        adamw_s, sgd_s = measure_optimizers_over(template, settings, optimizer_min_params)
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
    return ModelProfile(model_spec=source.spec, shape=shape_dict, precision=precision, seq_len=s,
                        layers=layers, edges=edges, kinds=kinds, environment=environment,
                        optimizer_step_s_per_param=adamw_s, optimizer_step_s_per_param_sgd=sgd_s,
                        source="measured")


