"""The two profile artifacts: a model profile and a cluster profile (versioned JSON).

Both load without torch. Times are seconds, sizes are bytes, rates are per second.

Model profile (``kind: model_profile``)::

    model        {"spec": str, "shape": {...} | null}   how to rebuild the model
    precision    dtype the numbers were measured in ("fp32" on CPU)
    seq_len      sequence length of the measured inputs
    environment  {"torch": ..., "device": ..., "threads": ...}
    layers       [{"name": "embed", "kind": "embed"}, {"name": "block.0", "kind": "block"}, ...]
                 in execution (topological) order
    edges        [["embed", "block.0"], ...]     data flow between layers (a DAG)
    kinds        {kind: LayerKindProfile}        identical layers share one measured kind
                 each with ``timings`` (one process alone) and, when measured inside real process
                 groups (``autoplan profile model --nproc N``), ``group_timings`` (every rank at once)

Cluster profile (``kind: cluster_profile``)::

    num_nodes, devices_per_node
    device       {"type", "memory_bytes", "compute_flops_per_s"}
    links        {"intra_node" | "inter_node": {op: {group_size: {"latency_s", "bandwidth_bytes_per_s"}}}}

A collective of ``n`` bytes on ``g`` ranks is predicted to take ``latency_s + n / bandwidth_bytes_per_s``
(alpha-beta, fitted per op and group size). ``n`` is the full buffer: the tensor of an all-reduce,
the gathered output of an all-gather, the input of a reduce-scatter, the message of a send/recv.  ``op`` is one of ``all_reduce, all_gather, reduce_scatter, send_recv``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from autoplan.errors import InputError
from autoplan.jsonio import (as_choice, as_dict, as_float, as_int, as_list, as_str, check_schema, read_json, require, short_repr,
                             write_json_atomic)

MODEL_PROFILE_VERSION = 1
CLUSTER_PROFILE_VERSION = 1
COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "send_recv")
LINK_CLASSES = ("intra_node", "inter_node")
Precision = Literal["fp32", "bf16", "fp16", "fp8", "fp8-rowwise"]
"""a training precision (:data:`PRECISIONS`)"""
BYTES_PER_ELEMENT: dict[Precision, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2, "fp8-rowwise": 2}
"""bytes of an activation element in each training precision: fp8 training keeps 16-bit activations
and weights (only the GEMM operands are fp8)"""
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
"""fp8: bf16 mixed precision whose block GEMMs run in fp8 with one scale per tensor (Transformer
Engine's delayed or current scaling, torchao's tensorwise); fp8-rowwise: one scale per row
(torchao's rowwise recipe)"""


def is_fp8(precision: str) -> bool:
    """fp8 training of either scaling (:data:`PRECISIONS`)."""
    return precision.startswith("fp8")


def fp8_not_measured(precision: str) -> str:
    """Why a model profile cannot be measured in fp8 ``precision``, and how fp8 is planned instead
    (``profile model`` measures fp32, bf16 and fp16 only)."""
    return (f"a model is not measured in {precision} yet (fp32, bf16, fp16): plan {precision} with the analytic "
            f"model on a catalogue cluster (autoplan solve --model NAME --cluster dgx-h100-80gb:N --precision "
            f"{precision})")


MAX_DEVICES = 2 ** 20
"""largest cluster (devices, and so any group size) a profile may describe: 1M, far above 16,384-GPU jobs"""
MAX_BATCH = 2 ** 20
"""largest micro-batch or global batch, in sequences"""
MAX_SEQ_LEN = 2 ** 24
"""longest sequence, in tokens"""


# --------------------------------------------------------------------------------------------
# model profile
# --------------------------------------------------------------------------------------------

@dataclass
class LayerTiming:
    """One measurement of one layer kind at one micro-batch size and TP degree."""

    mbs: int
    tp: int
    forward_s: float
    backward_s: float
    saved_activation_bytes: int
    """bytes autograd saves for backward, per micro-batch, on one TP rank"""
    output_bytes: int
    """bytes of the tensor leaving the layer, per micro-batch (what a pipeline cut sends)"""
    selective_recompute_s: float = 0.0
    """the time selective recomputation adds per micro-batch: analytic profiles, the part of
    ``forward_s`` it repeats; measured profiles (blocks), forward+backward under the executor's selective
    wrapper minus the plain forward+backward (profiles before 2026-12-02: the backward's difference only;
    0: not known, the cost model then uses the attention share of the FLOPs). Inside groups the cost
    model scales it by the layer's in-group over alone time (``coefficient_sources.in_group_selective_s``)"""
    saved_activation_bytes_selective: int | None = None
    """measured profiles (blocks): bytes a forward under the executor's selective recomputation
    keeps until backward (None: not measured; the planner then derives it from the shape)"""
    sequence_parallel_saving_s: float = 0.0
    """analytic profiles: forward + backward time that sequence parallel removes at this TP degree
    (norms, residual adds and dropout run on 1/tp of the tokens); 0: not known"""


@dataclass
class GroupTiming:
    """One layer kind measured inside real process groups with ``world`` processes working at once
    (:mod:`autoplan.execute.group_profile`): what the executor's wrappers really cost per micro-batch,
    framework work, contention and rank synchronisation included. The slowest rank's figures."""

    world: int
    """processes that ran at once (the cluster size these figures are for)"""
    mbs: int
    tp: int = 1
    """TP group size (the executor's ``parallelize_module`` plan and collectives); 1: no TP"""
    sp: int = 0
    """1: sequence parallel (the block takes and returns its sequence slice)"""
    dp: int = 1
    """FSDP group size under ``fully_shard(reshard_after_forward=True)`` (ZeRO-3); 1: no FSDP"""
    cp: int = 1
    """context-parallel group size (the executor's K/V exchange, :func:`autoplan.execute.cp.apply_cp`,
    on this rank's 1/cp of each sequence); 1: no context parallel (and no ``cp`` field in the file)"""
    forward_s: float = 0.0
    backward_s: float = 0.0
    """backward without data-parallel gradient reduction (FSDP: gradient sync off)"""
    backward_sync_s: float = 0.0
    """FSDP: a backward that also reduce-scatters the gradients. The whole model's figures
    (``whole_model_timings``): its forward and backward under DDP over every process of the job, less
    its plain forward, so ``backward_sync_s - backward_s`` is what DDP's all-reduce adds to a step as
    the executor runs it. 0 otherwise (and in profiles made before 2026-12-04)"""
    optimizer_s: float = 0.0
    """one AdamW ``step()`` over this layer's parameters as wrapped (DTensor shards under TP/FSDP)"""
    optimizer_sgd_s: float = 0.0
    """the same for SGD"""

    def key(self) -> tuple[int, int, int, int, int]:
        return self.world, self.tp, self.sp, self.dp, self.cp

    def to_dict(self) -> dict:
        """As stored: without ``cp`` when it is 1, so profiles without context parallel read as before."""
        return {k: v for k, v in asdict(self).items() if k != "cp" or v != 1}


@dataclass(frozen=True)
class PipelineTiming:
    """One short real pipeline of the model run inside the group job (``profile model --nproc N``,
    :mod:`autoplan.execute.pipeline_profile`): the executor's own stages and torch schedule, every
    rank of the job in some pipeline at once. The slowest rank's median step (forward and backward
    of every micro-batch, no optimizer)."""

    world: int
    """processes that ran at once"""
    pp: int
    vp: int
    schedule: str
    """``1f1b`` or ``interleaved``"""
    num_microbatches: int
    mbs: int
    chunks: tuple[int, ...]
    """units per chunk, in model order (chunk j on pipeline rank j mod pp)"""
    step_s: float
    reference_s: float = 0.0
    """the whole model's forward+backward at ``mbs`` on every rank at once, timed before each step (the
    slowest rank's median; 0: not measured): ``step_s`` relative to the in-group whole-model figure"""
    lone_reference_s: float = 0.0
    """the same on one rank while the others wait in a barrier (0: not measured): ``reference_s /
    lone_reference_s`` is how much a rank gains while the others wait (the relief's floor)"""


RELIEF_MODELS = ("shared_cores", "step_average")
"""the values of :attr:`PipelineCosts.relief_model`; the first is the one today's fit derives"""


@dataclass(frozen=True)
class PipelineCosts:
    """What a pipeline step costs beyond its layers' own time on ``world`` processes, derived from
    the profile's :class:`PipelineTiming` runs of that world (:func:`autoplan.plan.pipeline_costs.fit_pipeline_costs`);
    the cost model's pipeline term uses it in place of the cluster's send/recv fit and of the
    assumption that a waiting rank leaves all of its core to the others."""

    world: int
    mbs: int
    """the micro-batch size of the runs (messages of other sizes add the cluster's bandwidth term)"""
    per_chunk_s: float
    """per chunk and micro-batch under 1F1B (and GPipe): its forward and backward actions in the
    schedule, the messages they send and receive and the waits between (beyond the layers' in-group time)"""
    idle_share: float
    """in [0, 1]: how much of its core a waiting rank leaves to the busy ones, as the runs showed
    (:func:`autoplan.plan.pipeline_costs.pipeline_relief`): 1 = all of it, 0 = nothing"""
    per_chunk_interleaved_s: float = 0.0
    """the same under interleaved 1F1B (torch's ``ScheduleInterleaved1F1B`` runs its actions through
    another code path than ``Schedule1F1B``: measured apart)"""
    per_step_s: float = 0.0
    """per step: the schedule's own work that does not grow with micro-batches or chunks"""
    slowdown: float = 1.0
    """the layers' in-group time over their time alone that the fit used (the relief's floor)"""
    fit_error: float = 0.0
    """the largest relative error of the fit on its runs"""
    pp: int = 0
    """the pipeline depth of the runs it was derived from (0: every run of the world, as profiles
    made before depths were measured apart hold it)"""
    relief_model: str = RELIEF_MODELS[0]
    """how the fit had waiting ranks lend their cores: ``shared_cores`` (moment by moment along the
    schedule, :func:`autoplan.plan.schedules.shared_cores_pipeline_s`; since 2026-12-06) or
    ``step_average`` (over the step as an average, profiles made before, read so when the key is
    absent; the planner fits those again from the profile's runs)"""


@dataclass
class LayerKindProfile:
    """Costs shared by every layer of one kind (e.g. every transformer block)."""

    param_count: int
    param_bytes: int
    """bytes of the parameters in the measured precision, unsharded"""
    tp_shardable: bool
    """whether tensor parallel divides this layer's parameters and compute"""
    timings: list[LayerTiming]
    flops_per_sample: float = 0.0
    """forward FLOPs per sample (sequence), if known; informational"""
    group_timings: list[GroupTiming] = field(default_factory=list)
    """measured inside real process groups (empty unless profiled with ``--nproc``)"""

    def group_timing(self, mbs: int, *, world: int, tp: int = 1, sp: int = 0, dp: int = 1,
                     cp: int = 1) -> GroupTiming | None:
        """The in-group figures at (world, tp, sp, dp, cp) for ``mbs``: measured, or from the measured
        sizes by :func:`mbs_curve` (times per micro-batch grow with it; the optimizer does not).
        None when that combination was not measured."""
        return _fit_group(self.group_timings, mbs, (world, tp, sp, dp, cp))

    def group_worlds(self) -> set[int]:
        return {g.world for g in self.group_timings}

    def timing(self, mbs: int, tp: int = 1) -> LayerTiming:
        """The timing at (mbs, tp): measured if present, else from the measured sizes by
        :func:`mbs_curve` at the nearest TP degree (scaled by tp ratio for shardable layers)."""
        for t in self.timings:
            if t.mbs == mbs and t.tp == tp:
                return t
        tps = sorted({t.tp for t in self.timings})
        if not tps:
            raise InputError("model profile: a layer kind has no timings")
        base_tp = tp if tp in tps else max([x for x in tps if x <= tp] or [min(tps)])
        pts = sorted((t for t in self.timings if t.tp == base_tp), key=lambda t: t.mbs)
        scale = (base_tp / tp) if self.tp_shardable else 1.0

        def fit(attr: str) -> float:
            return max(0.0, mbs_curve([t.mbs for t in pts], [float(getattr(t, attr)) for t in pts], mbs))

        def per_sample(attr: str) -> int:
            # memory is proportional to the micro-batch size: use the largest measurement
            t = pts[-1]
            return int(math.ceil(getattr(t, attr) * mbs / t.mbs))

        return LayerTiming(
            mbs=mbs, tp=tp,
            forward_s=fit("forward_s") * scale,
            backward_s=fit("backward_s") * scale,
            saved_activation_bytes=int(per_sample("saved_activation_bytes") * scale),
            output_bytes=per_sample("output_bytes"),
            selective_recompute_s=fit("selective_recompute_s") * scale,
            sequence_parallel_saving_s=fit("sequence_parallel_saving_s") * scale,
            saved_activation_bytes_selective=(
                int(per_sample("saved_activation_bytes_selective") * scale)
                if all(t.saved_activation_bytes_selective is not None for t in pts) else None),
        )


def _fit_group(timings: list[GroupTiming], mbs: int, key: tuple[int, int, int, int, int]) -> GroupTiming | None:
    """The figures with ``key`` (world, tp, sp, dp, cp) at ``mbs``: measured, or from the measured
    sizes by :func:`mbs_curve` (the optimizer does not depend on mbs); None when none has that key."""
    pts = sorted((g for g in timings if g.key() == key), key=lambda g: g.mbs)
    if not pts:
        return None
    for g in pts:
        if g.mbs == mbs:
            return g
    xs = [g.mbs for g in pts]

    def fit(attr: str) -> float:
        return max(0.0, mbs_curve(xs, [float(getattr(g, attr)) for g in pts], mbs))
    world, tp, sp, dp, cp = key
    return GroupTiming(world=world, mbs=mbs, tp=tp, sp=sp, dp=dp, cp=cp, forward_s=fit("forward_s"),
                       backward_s=fit("backward_s"), backward_sync_s=fit("backward_sync_s"),
                       optimizer_s=pts[-1].optimizer_s, optimizer_sgd_s=pts[-1].optimizer_sgd_s)


def mbs_curve(xs: list[int], ys: list[float], x: float) -> float:
    """A time per micro-batch measured at the sizes ``xs`` (ascending), at size ``x``: between two
    measured sizes the straight line between them; beyond the measured ones the line through the two
    nearest, but never cheaper per sample than the nearest measured size (a larger micro-batch is not
    assumed more efficient than measured: on CPUs it often is not, once its activations leave the
    caches); one measured size: proportional to the size."""
    if len(xs) == 1 or x <= 0:
        return ys[0] * x / xs[0]
    i = min(max(bisect.bisect_left(xs, x), 1), len(xs) - 1)      # the segment [xs[i-1], xs[i]] or the nearest
    (x0, y0), (x1, y1) = (xs[i - 1], ys[i - 1]), (xs[i], ys[i])
    line = y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    if x > x1:
        return max(y1 * x / x1, line)
    if x < x0:
        return max(y0 * x / x0, line)
    return line


@dataclass
class LayerInfo:
    name: str
    kind: str


def _layer_kind(v: Any, where: str) -> LayerKindProfile:
    v = as_dict(v, where)
    timings, seen = [], set()
    for i, t in enumerate(as_list(require(v, "timings", where), f"{where}.timings")):
        at = f"{where}.timings[{i}]"
        t = as_dict(t, at)
        timing = LayerTiming(
            mbs=as_int(require(t, "mbs", at), f"{at}.mbs", minimum=1, maximum=MAX_BATCH),
            tp=as_int(t.get("tp", 1), f"{at}.tp", minimum=1, maximum=MAX_DEVICES),
            forward_s=as_float(require(t, "forward_s", at), f"{at}.forward_s"),
            backward_s=as_float(require(t, "backward_s", at), f"{at}.backward_s"),
            saved_activation_bytes=as_int(require(t, "saved_activation_bytes", at), f"{at}.saved_activation_bytes"),
            output_bytes=as_int(require(t, "output_bytes", at), f"{at}.output_bytes"),
            selective_recompute_s=as_float(t.get("selective_recompute_s", 0.0), f"{at}.selective_recompute_s"),
            sequence_parallel_saving_s=as_float(t.get("sequence_parallel_saving_s", 0.0),
                                                f"{at}.sequence_parallel_saving_s"),
            saved_activation_bytes_selective=(
                None if t.get("saved_activation_bytes_selective") is None else
                as_int(t["saved_activation_bytes_selective"], f"{at}.saved_activation_bytes_selective")))
        if (timing.mbs, timing.tp) in seen:
            raise InputError(f"{at}: a second timing at mbs {timing.mbs}, tp {timing.tp}")
        seen.add((timing.mbs, timing.tp))
        timings.append(timing)
    shardable = require(v, "tp_shardable", where)
    if not isinstance(shardable, bool):
        raise InputError(f"{where}.tp_shardable must be true or false, got {short_repr(shardable)}")
    return LayerKindProfile(param_count=as_int(require(v, "param_count", where), f"{where}.param_count"),
                            param_bytes=as_int(require(v, "param_bytes", where), f"{where}.param_bytes"),
                            tp_shardable=shardable, timings=timings,
                            flops_per_sample=as_float(v.get("flops_per_sample", 0.0), f"{where}.flops_per_sample"),
                            group_timings=_group_timings(v.get("group_timings", []), f"{where}.group_timings"))


def model_outputs(names: Sequence[str], edges: list[tuple[str, str]]) -> list[str]:
    """The layers no other layer consumes (the head: what the last chunk returns)."""
    consumed = {u for u, _ in edges}
    return [n for n in names if n not in consumed]


@dataclass
class ModelProfile:
    model_spec: str
    shape: dict | None
    precision: str
    seq_len: int
    layers: list[LayerInfo]
    edges: list[tuple[str, str]]
    kinds: dict[str, LayerKindProfile]
    environment: dict[str, Any] = field(default_factory=dict)
    optimizer_step_s_per_param: float = 0.0
    """measured optimizer update time per parameter on one device (0 if not measured)"""
    optimizer_step_s_per_param_sgd: float = 0.0
    """the same for plain SGD (0 if not measured); ``optimizer_step_s_per_param`` is AdamW"""
    source: str = "measured"
    """"measured" (on a device) or "analytic" (derived from a published hardware spec)"""
    whole_model_timings: list[GroupTiming] = field(default_factory=list)
    """the whole model (every unit composed) measured with ``world`` processes at once, per mbs:
    layers composed into a model run slower than each alone (``profile model --nproc``)"""
    pipeline_timings: list[PipelineTiming] = field(default_factory=list)
    """short real pipelines of the model inside the group job (``profile model --nproc``; absent in
    older profiles)"""
    pipeline_costs: list[PipelineCosts] = field(default_factory=list)
    """what those runs say a pipeline costs beyond its layers, one per world size and pipeline depth"""

    def pipeline_cost(self, world: int, pp: int = 0) -> PipelineCosts | None:
        """The pipeline costs derived for ``world`` processes and a pipeline ``pp`` deep: those of the
        measured depth nearest ``pp`` (by ratio; the shallower on a tie, any where ``pp`` is 0), or
        None (no pipeline measured on ``world`` processes)."""
        return nearest_depth([c for c in self.pipeline_costs if c.world == world], pp)

    def whole_model_timing(self, mbs: int, world: int) -> GroupTiming | None:
        """The whole model's in-group figures at ``mbs`` (:func:`mbs_curve` of the measured sizes)."""
        return _fit_group(self.whole_model_timings, mbs, (world, 1, 0, 1, 1))

    # -- helpers -------------------------------------------------------------------------
    def layer_names(self) -> list[str]:
        return [l.name for l in self.layers]

    def output_layers(self) -> list[str]:
        """The layers no other layer consumes (the head: what the model returns)."""
        return model_outputs(self.layer_names(), self.edges)

    def kind_of(self, name: str) -> LayerKindProfile:
        for l in self.layers:
            if l.name == name:
                return self.kinds[l.kind]
        raise InputError(f"model profile has no layer {name!r}")

    def total_params(self) -> int:
        return sum(self.kinds[l.kind].param_count for l in self.layers)

    # -- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "schema_version": MODEL_PROFILE_VERSION,
            "kind": "model_profile",
            "source": self.source,
            "model": {"spec": self.model_spec, "shape": self.shape},
            "precision": self.precision,
            "seq_len": self.seq_len,
            "environment": self.environment,
            "optimizer_step_s_per_param": self.optimizer_step_s_per_param,
            "optimizer_step_s_per_param_sgd": self.optimizer_step_s_per_param_sgd,
            "whole_model_timings": [g.to_dict() for g in self.whole_model_timings],
            **({"pipeline_timings": [{**asdict(t), "chunks": list(t.chunks)} for t in self.pipeline_timings],
                "pipeline_costs": [asdict(c) for c in self.pipeline_costs]} if self.pipeline_timings else {}),
            "layers": [asdict(l) for l in self.layers],
            "edges": [list(e) for e in self.edges],
            "kinds": {k: {**asdict(v), "timings": [asdict(t) for t in v.timings],
                          "group_timings": [g.to_dict() for g in v.group_timings]}
                      for k, v in self.kinds.items()},
        }

    def save(self, path) -> None:
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: dict, source: str = "model profile") -> "ModelProfile":
        """Check and load a model profile; InputError (one line naming the field) on anything a
        planner could not use: wrong types, NaN/inf, negative or huge numbers, unknown layers."""
        check_schema(d, "model_profile", MODEL_PROFILE_VERSION, source)
        source = f"{source}: malformed model profile"
        model = as_dict(require(d, "model", source), f"{source}: model")
        spec = as_str(model.get("spec", ""), f"{source}: model.spec")
        shape = model.get("shape")
        if shape is not None:
            from autoplan.models.shapes import ModelShape
            ModelShape.from_dict(as_dict(shape, f"{source}: model.shape"), source=f"{source}: model.shape")
        layers = []
        for i, l in enumerate(as_list(require(d, "layers", source), f"{source}: layers")):
            l = as_dict(l, f"{source}: layers[{i}]")
            layers.append(LayerInfo(name=as_str(require(l, "name", f"{source}: layers[{i}]"), f"{source}: layers[{i}].name"),
                                    kind=as_str(require(l, "kind", f"{source}: layers[{i}]"), f"{source}: layers[{i}].kind")))
        kinds = {k: _layer_kind(v, f"{source}: kinds[{short_repr(k)}]")
                 for k, v in as_dict(require(d, "kinds", source), f"{source}: kinds").items()}
        edges = []
        for i, e in enumerate(as_list(require(d, "edges", source), f"{source}: edges")):
            if not isinstance(e, list) or len(e) != 2 or not all(isinstance(x, str) for x in e):
                raise InputError(f"{source}: edges[{i}] must be a pair of layer names, got {short_repr(e)}")
            edges.append((e[0], e[1]))
        if not layers:
            raise InputError(f"{source}: model profile has no layers")
        order = {}
        for l in layers:
            if l.name in order:
                raise InputError(f"{source}: layer {short_repr(l.name)} is listed twice")
            order[l.name] = len(order)
            if l.kind not in kinds:
                raise InputError(f"{source}: layer {short_repr(l.name)} has unknown kind {short_repr(l.kind)}")
            if not kinds[l.kind].timings:
                raise InputError(f"{source}: layer kind {short_repr(l.kind)} has no timings")
        for a, b in edges:
            if a not in order or b not in order:
                raise InputError(f"{source}: edge {short_repr(a)} -> {short_repr(b)} names an unknown layer")
            if order[a] >= order[b]:
                raise InputError(f"{source}: edge {short_repr(a)} -> {short_repr(b)} goes backwards: layers must be "
                                 f"listed in execution order")
        precision = as_choice(require(d, "precision", source), f"{source}: precision", PRECISIONS)
        return cls(model_spec=spec, shape=shape, precision=precision,
                   seq_len=as_int(require(d, "seq_len", source), f"{source}: seq_len", minimum=1, maximum=MAX_SEQ_LEN),
                   layers=layers, edges=edges, kinds=kinds,
                   environment=as_dict(d.get("environment", {}), f"{source}: environment"),
                   optimizer_step_s_per_param=as_float(d.get("optimizer_step_s_per_param", 0.0),
                                                       f"{source}: optimizer_step_s_per_param"),
                   optimizer_step_s_per_param_sgd=as_float(d.get("optimizer_step_s_per_param_sgd", 0.0),
                                                           f"{source}: optimizer_step_s_per_param_sgd"),
                   source=as_str(d.get("source", "measured"), f"{source}: source"),
                   whole_model_timings=_group_timings(d.get("whole_model_timings", []), f"{source}: whole_model_timings"),
                   pipeline_timings=[_pipeline_timing(t, f"{source}: pipeline_timings[{i}]")
                                     for i, t in enumerate(as_list(d.get("pipeline_timings", []),
                                                                   f"{source}: pipeline_timings"))],
                   pipeline_costs=[_pipeline_costs(c, f"{source}: pipeline_costs[{i}]")
                                   for i, c in enumerate(as_list(d.get("pipeline_costs", []),
                                                                 f"{source}: pipeline_costs"))])

    @classmethod
    def load(cls, path) -> "ModelProfile":
        return cls.from_dict(read_json(path, "model profile"), source=str(path))


def _known_keys(d: dict, cls, where: str) -> None:
    unknown = set(d) - set(cls.__dataclass_fields__)
    if unknown:
        raise InputError(f"{where}: unknown keys {short_repr(', '.join(sorted(map(str, unknown))), 80)}")


def _pipeline_timing(t: Any, where: str) -> PipelineTiming:
    """A PipelineTiming from JSON (InputError naming the field otherwise)."""
    t = as_dict(t, where)
    _known_keys(t, PipelineTiming, where)
    size = {f: as_int(require(t, f, where), f"{where}.{f}", minimum=1, maximum=MAX_DEVICES)
            for f in ("world", "pp", "vp", "num_microbatches", "mbs")}
    schedule = as_str(require(t, "schedule", where), f"{where}.schedule")
    if schedule not in ("gpipe", "1f1b", "interleaved"):
        raise InputError(f"{where}.schedule must be gpipe, 1f1b or interleaved, got {short_repr(schedule)}")
    chunks = tuple(as_int(c, f"{where}.chunks", minimum=1, maximum=MAX_DEVICES)
                   for c in as_list(require(t, "chunks", where), f"{where}.chunks"))
    if len(chunks) != size["pp"] * size["vp"]:
        raise InputError(f"{where}: {len(chunks)} chunks listed but pp*vp = {size['pp'] * size['vp']}")
    return PipelineTiming(**size, schedule=schedule, chunks=chunks,
                          step_s=as_float(require(t, "step_s", where), f"{where}.step_s", positive=True),
                          reference_s=as_float(t.get("reference_s", 0.0), f"{where}.reference_s"),
                          lone_reference_s=as_float(t.get("lone_reference_s", 0.0), f"{where}.lone_reference_s"))


def nearest_depth(costs: list[PipelineCosts], pp: int) -> PipelineCosts | None:
    """The one of ``costs`` measured at the pipeline depth nearest ``pp`` (by ratio; the shallower on a
    tie; the first where ``pp`` or the depths are 0), or None where ``costs`` is empty."""
    def distance(c: PipelineCosts) -> tuple[float, int]:
        return (abs(math.log(c.pp / pp)) if c.pp and pp else 0.0, c.pp)
    return min(costs, key=distance) if costs else None


def _pipeline_costs(c: Any, where: str) -> PipelineCosts:
    """A PipelineCosts from JSON (InputError naming the field otherwise)."""
    c = as_dict(c, where)
    _known_keys(c, PipelineCosts, where)
    return PipelineCosts(
        world=as_int(require(c, "world", where), f"{where}.world", minimum=1, maximum=MAX_DEVICES),
        mbs=as_int(require(c, "mbs", where), f"{where}.mbs", minimum=1, maximum=MAX_BATCH),
        per_chunk_s=as_float(require(c, "per_chunk_s", where), f"{where}.per_chunk_s"),
        idle_share=as_float(require(c, "idle_share", where), f"{where}.idle_share", maximum=1.0),
        per_chunk_interleaved_s=as_float(c.get("per_chunk_interleaved_s", 0.0), f"{where}.per_chunk_interleaved_s"),
        per_step_s=as_float(c.get("per_step_s", 0.0), f"{where}.per_step_s"),
        slowdown=as_float(c.get("slowdown", 1.0), f"{where}.slowdown", minimum=1.0),
        fit_error=as_float(c.get("fit_error", 0.0), f"{where}.fit_error"),
        pp=as_int(c.get("pp", 0), f"{where}.pp", minimum=0, maximum=MAX_DEVICES),
        relief_model=as_choice(c.get("relief_model", "step_average"), f"{where}.relief_model", RELIEF_MODELS))


def _group_timing(g: Any, where: str) -> GroupTiming:
    """A GroupTiming from JSON: positive integer sizes, finite non-negative times (InputError otherwise)."""
    g = as_dict(g, where)
    fields = GroupTiming.__dataclass_fields__
    _known_keys(g, GroupTiming, where)
    if "world" not in g or "mbs" not in g:
        raise InputError(f"{where}: needs world and mbs")
    return GroupTiming(**{f: (as_float(g[f], f"{where}.{f}") if f.endswith("_s") else
                              as_int(g[f], f"{where}.{f}", minimum=0 if f == "sp" else 1,
                                     maximum=1 if f == "sp" else MAX_DEVICES))
                          for f in fields if f in g})


def _group_timings(items: Any, where: str) -> list[GroupTiming]:
    """A list of GroupTimings, at most one per (world, tp, sp, dp, cp, mbs): a line is fitted through them."""
    out, seen = [], set()
    for i, g in enumerate(as_list(items, where)):
        t = _group_timing(g, f"{where}[{i}]")
        if (t.key(), t.mbs) in seen:
            raise InputError(f"{where}[{i}]: a second timing for world {t.world}, tp {t.tp}, sp {t.sp}, dp {t.dp}, "
                             f"cp {t.cp}, mbs {t.mbs}")
        seen.add((t.key(), t.mbs))
        out.append(t)
    return out


def _group_size(key: Any, where: str) -> int:
    """A JSON object key that is a group size (``"8"``)."""
    try:
        size = int(key)
    except ValueError:
        raise InputError(f"{where}: {short_repr(key)} is not a group size") from None
    if not 1 <= size <= MAX_DEVICES:
        raise InputError(f"{where}: group size {size} must be between 1 and {MAX_DEVICES}")
    return size


# --------------------------------------------------------------------------------------------
# cluster profile
# --------------------------------------------------------------------------------------------

@dataclass
class LinkFit:
    """Alpha-beta fit of one collective at one group size: t(n) = latency_s + n / bandwidth."""

    latency_s: float
    bandwidth_bytes_per_s: float
    residual_rel: float = 0.0
    """root-mean-square relative residual of the fit over the measured sizes"""

    def time_s(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.bandwidth_bytes_per_s


@dataclass
class DeviceSpec:
    type: str
    memory_bytes: int
    """memory budget of one device (on CPU: the per-process budget autoplan plans for)"""
    compute_flops_per_s: float
    """achievable dense matmul rate, measured or from a spec"""
    name: str = ""
    memory_bandwidth_bytes_per_s: float = 0.0
    """achievable device-memory copy bandwidth, measured or from a spec (0 if unknown)"""
    concurrent_compute_flops_per_s: float = 0.0
    """matmul rate of one device while every device computes at once (0 if not measured);
    below ``compute_flops_per_s`` when devices share cores, power or memory bandwidth"""

    @property
    def compute_slowdown(self) -> float:
        """How much slower a device computes when all compute at once than alone (>= 1)."""
        if self.concurrent_compute_flops_per_s <= 0:
            return 1.0
        return max(1.0, self.compute_flops_per_s / self.concurrent_compute_flops_per_s)


@dataclass
class Calibration:
    """Corrections learned by ``autoplan validate --calibrate`` from measured runs on this cluster.

    The cost model multiplies every compute coefficient (forward, backward, recompute, optimizer)
    by ``compute_scale``, tensor-parallel communication by ``tp_scale(tp)`` (per TP degree where
    fitted, else ``tp_comm_scale``), pipeline sends by ``comm_scale`` and data-parallel
    synchronisation by ``dp_sync_scale``, adds
    ``step_overhead_s`` to each step (framework work per step: Python, schedules, launches) and
    ``memory_overhead_bytes`` to each device (what the parts do not account for: allocator,
    communication buffers, temporaries). The identity calibration changes nothing."""

    compute_scale: float = 1.0
    comm_scale: float = 1.0
    """pipeline sends (and, in profiles calibrated before dp_sync_scale existed, DP synchronisation)"""
    tp_comm_scale: float = 1.0
    """tensor-parallel communication (on the critical path, many small calls, DTensor's own work)"""
    step_overhead_s: float = 0.0
    memory_overhead_bytes: int = 0
    runs: int = 0
    """how many measured layouts the figures were fitted to (0: not calibrated)"""
    dp_sync_scale: float = 1.0
    """data-parallel gradient (and ZeRO weight) synchronisation"""
    tp_comm_scale_by_degree: dict[int, float] = field(default_factory=dict)
    """TP communication scale per TP degree, where enough runs of that degree informed it"""

    def tp_scale(self, tp: int) -> float:
        return self.tp_comm_scale_by_degree.get(tp, self.tp_comm_scale)

    def summary(self) -> str:
        """One line, e.g. ``compute x1.020, TP communication x1.3 (tp2 x1.1, tp4 x1.6), ...``."""
        per = ", ".join(f"tp{t} x{v:.3f}" for t, v in sorted(self.tp_comm_scale_by_degree.items()))
        return (f"compute x{self.compute_scale:.3f}, TP communication x{self.tp_comm_scale:.3f}"
                + (f" ({per})" if per else "") + f", pipeline sends x{self.comm_scale:.3f}, "
                f"DP synchronisation x{self.dp_sync_scale:.3f}, +{self.step_overhead_s * 1e3:.1f} ms per step, "
                f"+{self.memory_overhead_bytes / 2**20:.1f} MiB per device ({self.runs} runs)")


@dataclass
class ClusterProfile:
    name: str
    num_nodes: int
    devices_per_node: int
    device: DeviceSpec
    links: dict[str, dict[str, dict[int, LinkFit]]]
    """links[link_class][op][group_size]"""
    environment: dict[str, Any] = field(default_factory=dict)
    source: str = "measured"
    sources: dict[str, str] = field(default_factory=dict)
    """where each figure comes from (catalogue entries cite their datasheets)"""
    rank_hosts: list[str] = field(default_factory=list)
    """for a measured multi-node profile: the host of each rank"""
    calibration: Calibration = field(default_factory=Calibration)

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.devices_per_node

    def link(self, op: str, group_size: int, spans_nodes: bool) -> LinkFit:
        """The fit for ``op`` on ``group_size`` ranks, over the slow class if the group spans
        nodes. Unmeasured group sizes scale from the nearest measured one with the ring factor
        (all-reduce moves 2(g-1)/g of the bytes, all-gather/reduce-scatter (g-1)/g)."""
        cls = "inter_node" if spans_nodes and self.num_nodes > 1 else "intra_node"
        table = self.links.get(cls) or self.links.get("intra_node")
        if not table or op not in table or not table[op]:
            raise InputError(f"cluster profile {self.name!r} has no {cls} figures for {op}")
        fits = table[op]
        if group_size in fits:
            return fits[group_size]
        near = min(fits, key=lambda g: (abs(g - group_size), -g))
        f = fits[near]
        if op == "send_recv":
            return f

        def ring(g: int) -> float:
            return (2.0 if op == "all_reduce" else 1.0) * (g - 1) / g
        scale = ring(group_size) / ring(near) if near > 1 else 1.0
        lat = f.latency_s * (group_size - 1) / max(1, near - 1)
        return LinkFit(latency_s=lat, bandwidth_bytes_per_s=f.bandwidth_bytes_per_s / scale)

    def collective_time_s(self, op: str, nbytes: float, group_size: int, spans_nodes: bool) -> float:
        """Predicted time of one collective; zero for a group of one or an empty message."""
        if group_size <= 1 or nbytes <= 0:
            return 0.0
        return self.link(op, group_size, spans_nodes).time_s(nbytes)

    def to_dict(self) -> dict:
        return {
            "schema_version": CLUSTER_PROFILE_VERSION,
            "kind": "cluster_profile",
            "source": self.source,
            "name": self.name,
            "num_nodes": self.num_nodes,
            "devices_per_node": self.devices_per_node,
            "world_size": self.world_size,
            "device": asdict(self.device),
            "links": {c: {op: {str(g): asdict(f) for g, f in sorted(fits.items())} for op, fits in ops.items()}
                      for c, ops in self.links.items()},
            "rank_hosts": self.rank_hosts,
            "calibration": asdict(self.calibration),
            "environment": self.environment,
            "sources": self.sources,
        }

    def save(self, path) -> None:
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: dict, source: str = "cluster profile") -> "ClusterProfile":
        """Check and load a cluster profile; InputError (one line naming the field) on wrong types,
        NaN/inf, non-positive rates or sizes, huge values, unknown link classes or collectives."""
        check_schema(d, "cluster_profile", CLUSTER_PROFILE_VERSION, source)
        file, source = source, f"{source}: malformed cluster profile"
        dev = as_dict(require(d, "device", source), f"{source}: device")
        at = f"{source}: device"
        device = DeviceSpec(
            type=as_str(require(dev, "type", at), f"{at}.type"),
            memory_bytes=as_int(require(dev, "memory_bytes", at), f"{at}.memory_bytes", minimum=1),
            compute_flops_per_s=as_float(require(dev, "compute_flops_per_s", at), f"{at}.compute_flops_per_s",
                                         positive=True),
            name=as_str(dev.get("name", ""), f"{at}.name"),
            memory_bandwidth_bytes_per_s=as_float(dev.get("memory_bandwidth_bytes_per_s", 0.0),
                                                  f"{at}.memory_bandwidth_bytes_per_s"),
            concurrent_compute_flops_per_s=as_float(dev.get("concurrent_compute_flops_per_s", 0.0),
                                                    f"{at}.concurrent_compute_flops_per_s"))
        links: dict[str, dict[str, dict[int, LinkFit]]] = {}
        for c, ops in as_dict(require(d, "links", source), f"{source}: links").items():
            if c not in LINK_CLASSES:
                raise InputError(f"{source}: unknown link class {short_repr(c)} (known: {', '.join(LINK_CLASSES)})")
            links[c] = {}
            for op, fits in as_dict(ops, f"{source}: links.{c}").items():
                if op not in COLLECTIVE_OPS:
                    raise InputError(f"{source}: unknown collective {short_repr(op)} (known: {', '.join(COLLECTIVE_OPS)})")
                links[c][op] = {}
                for g, f in as_dict(fits, f"{source}: links.{c}.{op}").items():
                    where = f"{source}: links.{c}.{op}[{short_repr(g)}]"
                    size = _group_size(g, where)
                    f = as_dict(f, where)
                    links[c][op][size] = LinkFit(
                        latency_s=as_float(require(f, "latency_s", where), f"{where}.latency_s"),
                        bandwidth_bytes_per_s=as_float(require(f, "bandwidth_bytes_per_s", where),
                                                       f"{where}.bandwidth_bytes_per_s", positive=True),
                        residual_rel=as_float(f.get("residual_rel", 0.0), f"{where}.residual_rel"))
        num_nodes = as_int(require(d, "num_nodes", source), f"{source}: num_nodes", minimum=1, maximum=MAX_DEVICES)
        per_node = as_int(require(d, "devices_per_node", source), f"{source}: devices_per_node", minimum=1,
                          maximum=MAX_DEVICES)
        if num_nodes * per_node > MAX_DEVICES:
            raise InputError(f"{source}: {num_nodes} nodes x {per_node} devices is more than {MAX_DEVICES} devices")
        if "world_size" in d and d["world_size"] != num_nodes * per_node:
            raise InputError(f"{source}: world_size {short_repr(d['world_size'])} != num_nodes x devices_per_node "
                             f"= {num_nodes * per_node}")
        hosts = as_list(d.get("rank_hosts", []), f"{source}: rank_hosts")
        if not all(isinstance(h, str) for h in hosts) or (hosts and len(hosts) != num_nodes * per_node):
            raise InputError(f"{source}: rank_hosts must list one host name per device")
        return cls(name=as_str(d.get("name", file), f"{source}: name"), num_nodes=num_nodes, devices_per_node=per_node,
                   device=device, links=links, environment=as_dict(d.get("environment", {}), f"{source}: environment"),
                   source=as_str(d.get("source", "measured"), f"{source}: source"),
                   sources=as_dict(d.get("sources", {}), f"{source}: sources"),
                   rank_hosts=list(hosts), calibration=_calibration(d.get("calibration"), source))

    @classmethod
    def load(cls, path) -> "ClusterProfile":
        return cls.from_dict(read_json(path, "cluster profile"), source=str(path))


def _calibration(d: dict | None, source: str) -> Calibration:
    if not d:
        return Calibration()
    at = f"{source}: calibration"
    d = as_dict(d, at)
    return Calibration(
        compute_scale=as_float(d.get("compute_scale", 1.0), f"{at}.compute_scale", positive=True, maximum=1e6),
        comm_scale=as_float(d.get("comm_scale", 1.0), f"{at}.comm_scale", positive=True, maximum=1e6),
        dp_sync_scale=as_float(d.get("dp_sync_scale", d.get("comm_scale", 1.0)), f"{at}.dp_sync_scale", positive=True,
                               maximum=1e6),
        tp_comm_scale_by_degree={_group_size(k, f"{at}.tp_comm_scale_by_degree"):
                                 as_float(v, f"{at}.tp_comm_scale_by_degree[{short_repr(k)}]", positive=True, maximum=1e6)
                                 for k, v in as_dict(d.get("tp_comm_scale_by_degree", {}),
                                                     f"{at}.tp_comm_scale_by_degree").items()},
        tp_comm_scale=as_float(d.get("tp_comm_scale", 1.0), f"{at}.tp_comm_scale", positive=True, maximum=1e6),
        step_overhead_s=as_float(d.get("step_overhead_s", 0.0), f"{at}.step_overhead_s"),
        memory_overhead_bytes=as_int(d.get("memory_overhead_bytes", 0), f"{at}.memory_overhead_bytes"),
        runs=as_int(d.get("runs", 0), f"{at}.runs"))
