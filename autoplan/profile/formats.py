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

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from autoplan.errors import InputError
from autoplan.jsonio import check_schema, read_json, require, write_json_atomic

MODEL_PROFILE_VERSION = 1
CLUSTER_PROFILE_VERSION = 1
COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "send_recv")
LINK_CLASSES = ("intra_node", "inter_node")


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
    """analytic profiles: the part of ``forward_s`` that selective recomputation repeats (0: not
    known; the cost model then uses the attention share of the FLOPs)"""
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
    forward_s: float = 0.0
    backward_s: float = 0.0
    """backward without data-parallel gradient reduction (FSDP: gradient sync off)"""
    backward_sync_s: float = 0.0
    """FSDP only: a backward that also reduce-scatters the gradients (0 otherwise)"""
    optimizer_s: float = 0.0
    """one AdamW ``step()`` over this layer's parameters as wrapped (DTensor shards under TP/FSDP)"""
    optimizer_sgd_s: float = 0.0
    """the same for SGD"""

    def key(self) -> tuple[int, int, int, int]:
        return self.world, self.tp, self.sp, self.dp


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

    def group_timing(self, mbs: int, *, world: int, tp: int = 1, sp: int = 0, dp: int = 1) -> GroupTiming | None:
        """The in-group figures at (world, tp, sp, dp) for ``mbs``: measured, or linear in mbs
        through the measured sizes (times per micro-batch grow with it; the optimizer does not).
        None when that combination was not measured."""
        return _fit_group(self.group_timings, mbs, (world, tp, sp, dp))

    def group_worlds(self) -> set[int]:
        return {g.world for g in self.group_timings}

    def timing(self, mbs: int, tp: int = 1) -> LayerTiming:
        """The timing at (mbs, tp): measured if present, else fitted linearly in mbs from the
        measurements at the nearest TP degree (scaled by tp ratio for shardable layers)."""
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
            return max(0.0, linear_fit([t.mbs for t in pts], [float(getattr(t, attr)) for t in pts], mbs))

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
        )


def _fit_group(timings: list[GroupTiming], mbs: int, key: tuple[int, int, int, int]) -> GroupTiming | None:
    """The figures with ``key`` (world, tp, sp, dp) at ``mbs``: measured, or linear in mbs through
    the measured sizes (the optimizer does not depend on mbs); None when none has that key."""
    pts = sorted((g for g in timings if g.key() == key), key=lambda g: g.mbs)
    if not pts:
        return None
    for g in pts:
        if g.mbs == mbs:
            return g
    xs = [g.mbs for g in pts]

    def fit(attr: str) -> float:
        return max(0.0, linear_fit(xs, [float(getattr(g, attr)) for g in pts], mbs))
    world, tp, sp, dp = key
    return GroupTiming(world=world, mbs=mbs, tp=tp, sp=sp, dp=dp, forward_s=fit("forward_s"),
                       backward_s=fit("backward_s"), backward_sync_s=fit("backward_sync_s"),
                       optimizer_s=pts[-1].optimizer_s, optimizer_sgd_s=pts[-1].optimizer_sgd_s)


def linear_fit(xs: list[int], ys: list[float], x: float) -> float:
    """Least-squares line through (xs, ys) evaluated at ``x``; through the origin for one point."""
    if len(xs) == 1:
        return ys[0] * x / xs[0]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((a - mx) ** 2 for a in xs)
    slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sxx
    return my - slope * mx + slope * x


@dataclass
class LayerInfo:
    name: str
    kind: str


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

    def whole_model_timing(self, mbs: int, world: int) -> GroupTiming | None:
        """The whole model's in-group figures at ``mbs`` (linear in mbs between measured sizes)."""
        return _fit_group(self.whole_model_timings, mbs, (world, 1, 0, 1))

    # -- helpers -------------------------------------------------------------------------
    def layer_names(self) -> list[str]:
        return [l.name for l in self.layers]

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
            "whole_model_timings": [asdict(g) for g in self.whole_model_timings],
            "layers": [asdict(l) for l in self.layers],
            "edges": [list(e) for e in self.edges],
            "kinds": {k: {**asdict(v), "timings": [asdict(t) for t in v.timings]}
                      for k, v in self.kinds.items()},
        }

    def save(self, path) -> None:
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: dict, source: str = "model profile") -> "ModelProfile":
        check_schema(d, "model_profile", MODEL_PROFILE_VERSION, source)
        try:
            model = require(d, "model", source, dict)
            layers = [LayerInfo(name=str(l["name"]), kind=str(l["kind"]))
                      for l in require(d, "layers", source, list)]
            kinds = {}
            for k, v in require(d, "kinds", source, dict).items():
                timings = [LayerTiming(mbs=int(t["mbs"]), tp=int(t.get("tp", 1)),
                                       forward_s=float(t["forward_s"]), backward_s=float(t["backward_s"]),
                                       saved_activation_bytes=int(t["saved_activation_bytes"]),
                                       output_bytes=int(t["output_bytes"]),
                                       selective_recompute_s=float(t.get("selective_recompute_s", 0.0)),
                                       sequence_parallel_saving_s=float(t.get("sequence_parallel_saving_s", 0.0)))
                           for t in v["timings"]]
                groups = [_group_timing(g) for g in v.get("group_timings", [])]
                kinds[k] = LayerKindProfile(param_count=int(v["param_count"]), param_bytes=int(v["param_bytes"]),
                                            tp_shardable=bool(v["tp_shardable"]), timings=timings,
                                            flops_per_sample=float(v.get("flops_per_sample", 0.0)),
                                            group_timings=groups)
            edges = [(str(a), str(b)) for a, b in require(d, "edges", source, list)]
            whole = [_group_timing(g) for g in d.get("whole_model_timings", [])]
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{source}: malformed model profile ({type(e).__name__}: {e})") from None
        names = {l.name for l in layers}
        if not layers:
            raise InputError(f"{source}: model profile has no layers")
        for l in layers:
            if l.kind not in kinds:
                raise InputError(f"{source}: layer {l.name!r} has unknown kind {l.kind!r}")
            if not kinds[l.kind].timings:
                raise InputError(f"{source}: layer kind {l.kind!r} has no timings")
        for a, b in edges:
            if a not in names or b not in names:
                raise InputError(f"{source}: edge {a!r} -> {b!r} names an unknown layer")
        return cls(model_spec=str(model.get("spec", "")), shape=model.get("shape"),
                   precision=str(require(d, "precision", source, str)), seq_len=int(require(d, "seq_len", source, int)),
                   layers=layers, edges=edges, kinds=kinds, environment=dict(d.get("environment", {})),
                   optimizer_step_s_per_param=float(d.get("optimizer_step_s_per_param", 0.0)),
                   optimizer_step_s_per_param_sgd=float(d.get("optimizer_step_s_per_param_sgd", 0.0)),
                   source=str(d.get("source", "measured")), whole_model_timings=whole)

    @classmethod
    def load(cls, path) -> "ModelProfile":
        return cls.from_dict(read_json(path, "model profile"), source=str(path))


def _group_timing(g: dict) -> GroupTiming:
    """A GroupTiming from JSON: integers and finite, non-negative times (ValueError otherwise)."""
    out = GroupTiming(**{f: (float(g[f]) if f.endswith("_s") else int(g[f]))
                         for f in GroupTiming.__dataclass_fields__ if f in g})
    times = [out.forward_s, out.backward_s, out.backward_sync_s, out.optimizer_s, out.optimizer_sgd_s]
    if not all(math.isfinite(t) and t >= 0 for t in times) or min(out.world, out.mbs, out.tp, out.dp) < 1:
        raise ValueError(f"group timing {g} has a negative, non-finite or zero figure")
    return out


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
        check_schema(d, "cluster_profile", CLUSTER_PROFILE_VERSION, source)
        try:
            dev = require(d, "device", source, dict)
            device = DeviceSpec(type=str(dev["type"]), memory_bytes=int(dev["memory_bytes"]),
                                compute_flops_per_s=float(dev["compute_flops_per_s"]), name=str(dev.get("name", "")),
                                memory_bandwidth_bytes_per_s=float(dev.get("memory_bandwidth_bytes_per_s", 0.0)),
                                concurrent_compute_flops_per_s=float(dev.get("concurrent_compute_flops_per_s", 0.0)))
            links: dict[str, dict[str, dict[int, LinkFit]]] = {}
            for c, ops in require(d, "links", source, dict).items():
                if c not in LINK_CLASSES:
                    raise InputError(f"{source}: unknown link class {c!r}")
                links[c] = {}
                for op, fits in ops.items():
                    if op not in COLLECTIVE_OPS:
                        raise InputError(f"{source}: unknown collective {op!r}")
                    links[c][op] = {int(g): LinkFit(latency_s=float(f["latency_s"]),
                                                    bandwidth_bytes_per_s=float(f["bandwidth_bytes_per_s"]),
                                                    residual_rel=float(f.get("residual_rel", 0.0)))
                                    for g, f in fits.items()}
            num_nodes = int(require(d, "num_nodes", source, int))
            per_node = int(require(d, "devices_per_node", source, int))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{source}: malformed cluster profile ({type(e).__name__}: {e})") from None
        if num_nodes < 1 or per_node < 1:
            raise InputError(f"{source}: num_nodes and devices_per_node must be positive")
        if device.memory_bytes <= 0 or device.compute_flops_per_s <= 0:
            raise InputError(f"{source}: device memory and compute rate must be positive")
        for c, ops in links.items():
            for op, fits in ops.items():
                for g, f in fits.items():
                    if f.bandwidth_bytes_per_s <= 0 or f.latency_s < 0:
                        raise InputError(f"{source}: {c}/{op}/{g}: bandwidth must be > 0 and latency >= 0")
        return cls(name=str(d.get("name", source)), num_nodes=num_nodes, devices_per_node=per_node,
                   device=device, links=links, environment=dict(d.get("environment", {})),
                   source=str(d.get("source", "measured")), sources=dict(d.get("sources", {})),
                   rank_hosts=list(d.get("rank_hosts", [])), calibration=_calibration(d.get("calibration"), source))

    @classmethod
    def load(cls, path) -> "ClusterProfile":
        return cls.from_dict(read_json(path, "cluster profile"), source=str(path))


def _calibration(d: dict | None, source: str) -> Calibration:
    if not d:
        return Calibration()
    try:
        comm = float(d.get("comm_scale", 1.0))
        c = Calibration(compute_scale=float(d.get("compute_scale", 1.0)), comm_scale=comm,
                        tp_comm_scale=float(d.get("tp_comm_scale", 1.0)),
                        step_overhead_s=float(d.get("step_overhead_s", 0.0)),
                        memory_overhead_bytes=int(d.get("memory_overhead_bytes", 0)), runs=int(d.get("runs", 0)),
                        dp_sync_scale=float(d.get("dp_sync_scale", comm)),
                        tp_comm_scale_by_degree={int(k): float(v)
                                                 for k, v in dict(d.get("tp_comm_scale_by_degree", {})).items()})
    except (TypeError, ValueError) as e:
        raise InputError(f"{source}: malformed calibration ({e})") from None
    scales = [c.compute_scale, c.comm_scale, c.tp_comm_scale, c.dp_sync_scale, *c.tp_comm_scale_by_degree.values()]
    if (not all(math.isfinite(x) and x > 0 for x in scales) or not math.isfinite(c.step_overhead_s)
            or c.step_overhead_s < 0 or c.memory_overhead_bytes < 0):
        raise InputError(f"{source}: calibration scales must be positive and overheads non-negative")
    return c
