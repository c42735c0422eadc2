"""The plan artifact: a layout, its predicted cost term by term, and how the solver got there.

Loads without torch. See DESIGN.md "Contract" for the JSON shape; ``Plan.to_dict`` writes it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from autoplan.errors import InputError, LayoutError
from autoplan.jsonio import (as_dict, as_float, as_int, as_list, as_str, check_schema, read_json, require, short_repr,
                             write_json_atomic)
from autoplan.models.shapes import tp_violation
from autoplan.plan.schedules import SCHEDULES, chunks_rule_violation, schedule_rule_violation
from autoplan.plan.training import TrainingConfig, choice_violation

PLAN_VERSION = 1
RECOMPUTE = ("none", "selective", "full")
GRAD_COMPRESSION = ("none", "fp16", "powersgd")
POWERSGD_RANK = 4
"""rank of PowerSGD's low-rank gradient approximation (Vogels et al. 2019 use 1-4)"""
COST_TERMS = ("compute", "recompute", "tp_comm", "cp_comm", "pp_p2p", "bubble", "dp_sync", "optimizer", "overhead")
MAX_DEGREE = 2 ** 20
"""largest dp, tp, pp, vp, world size, micro-batch size or count a layout may hold (1M)"""


def data_parallel_rule_violation(*, dp: int, zero: int) -> str | None:
    """ZeRO shards state across data-parallel replicas: stages 1-3 need dp > 1."""
    if zero > 0 and dp == 1:
        return f"zero={zero} needs dp > 1 (ZeRO shards optimizer state across data-parallel replicas)"
    return None


def tp_parts(shape: dict | None) -> dict[str, int | None]:
    """The dimensions of a model profile's ``shape`` that tensor parallelism splits, as the keyword
    arguments of :func:`autoplan.models.shapes.tp_violation` and :meth:`Layout.check_against`."""
    sh = shape or {}
    return {k: sh.get(k) for k in ("heads", "kv_heads", "ffn_hidden")}


@dataclass
class Layout:
    """A complete parallel layout. ``stages[i]`` lists the layer names on pipeline rank i (with
    ``vp > 1``, ``stages`` has ``pp * vp`` entries and rank r owns chunks r, r+pp, r+2pp, ...)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    vp: int = 1
    mbs: int = 1
    num_microbatches: int = 1
    zero: int = 0
    recompute: str = "none"
    schedule: str = "1f1b"
    sp: int = 0
    stages: list[list[str]] = field(default_factory=list)
    recompute_layers: dict[str, str] = field(default_factory=dict)
    """per-layer recompute modes that override ``recompute`` (chosen by the ILP per pipeline rank:
    early ranks of 1F1B hold more micro-batches and gain more from recomputing)"""
    grad_compression: str = "none"
    """LOSSY, opt-in: ``fp16`` averages gradients rounded to fp16; ``powersgd`` averages a rank-4
    approximation of each gradient matrix (with error feedback). DDP layouts only."""
    sync_every: int = 1
    """LOSSY, opt-in: local SGD. > 1: replicas step on their own gradients and average their
    parameters every ``sync_every`` steps instead of averaging gradients every step. DDP only."""
    cp: int = 1
    """context parallel: each of cp ranks holds 1/cp of every sequence (load-balanced causal chunks
    i and 2*cp-1-i of 2*cp) and exchanges keys and values in attention; cp ranks see the same samples
    and average gradients with the dp ranks. World = dp * cp * tp * pp."""

    def __post_init__(self) -> None:
        for k in ("dp", "tp", "pp", "cp", "vp", "mbs", "num_microbatches", "sync_every"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_DEGREE:
                raise LayoutError(f"layout: {k} must be an integer from 1 to {MAX_DEGREE}, got {short_repr(v)}")
        for k, top in (("zero", 3), ("sp", 1)):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= top:
                raise LayoutError(f"layout: {k} must be an integer from 0 to {top}, got {short_repr(v)}")
        if self.world_size > MAX_DEGREE:
            raise LayoutError(f"layout: {self.world_formula()} = {self.world_size} is more than {MAX_DEGREE} devices")
        for k, allowed in (("recompute", RECOMPUTE), ("schedule", SCHEDULES), ("grad_compression", GRAD_COMPRESSION)):
            v = getattr(self, k)
            if not isinstance(v, str) or v not in allowed:
                raise LayoutError(f"layout: {k} must be one of {'|'.join(allowed)}, got {short_repr(v)}")
        for name, mode in self.recompute_layers.items():
            if not isinstance(mode, str) or mode not in RECOMPUTE:
                raise LayoutError(f"layout: recompute mode of {short_repr(name)} must be one of {'|'.join(RECOMPUTE)}, "
                                  f"got {short_repr(mode)}")
        if self.lossy:
            if not (self.zero == 0 and self.tp == 1 and self.pp == 1 and self.cp == 1):
                raise LayoutError("layout: gradient compression and local SGD need plain data parallel (DDP: "
                                  "zero=0, tp=1, pp=1)")
            if self.grad_compression != "none" and self.sync_every > 1:
                raise LayoutError("layout: local SGD averages parameters, not gradients: no gradient compression with it")
        if self.sp and self.tp == 1:
            raise LayoutError("layout: sequence parallel (sp=1) needs tp > 1")
        why = chunks_rule_violation(self.schedule, vp=self.vp)
        if why:
            raise LayoutError(f"layout: {why}")
        if self.stages and len(self.stages) != self.pp * self.vp:
            raise LayoutError(f"layout: {len(self.stages)} stages listed but pp*vp = {self.pp * self.vp}")

    @property
    def lossy(self) -> bool:
        """Whether the layout changes the mathematics of training (compression, local SGD)."""
        return self.grad_compression != "none" or self.sync_every > 1

    def lossy_note(self) -> str:
        """What a lossy option changes, in words (empty when exact)."""
        if self.grad_compression == "fp16":
            return ("gradients are rounded to fp16 (about 3 significant digits) before they are averaged: "
                    "small gradient components lose precision")
        if self.grad_compression == "powersgd":
            return (f"each gradient matrix is averaged as a rank-{POWERSGD_RANK} approximation (PowerSGD); the "
                    "error is fed back into the next step's gradient, so the update is biased step to step")
        if self.sync_every > 1:
            return (f"local SGD: each replica steps on its own gradients and parameters are averaged every "
                    f"{self.sync_every} steps, so replicas drift apart in between (not synchronous SGD)")
        return ""

    @property
    def world_size(self) -> int:
        return self.dp * self.cp * self.tp * self.pp

    def world_formula(self, values: bool = False) -> str:
        """``dp*tp*pp`` (``dp*cp*tp*pp`` with context parallel); with ``values`` the degrees too."""
        names = ("dp", "cp", "tp", "pp") if self.cp > 1 else ("dp", "tp", "pp")
        text = "*".join(names)
        if values:
            text += " = " + "*".join(str(getattr(self, n)) for n in names)
        return text

    @property
    def grad_group(self) -> int:
        """Ranks that average (ZeRO: shard) each parameter's gradients: the dp replicas times the cp
        ranks, which see the same samples' other sequence chunks."""
        return self.dp * self.cp

    @property
    def global_batch(self) -> int:
        return self.dp * self.mbs * self.num_microbatches

    def degrees(self) -> tuple[int, int, int]:
        return self.dp, self.tp, self.pp

    def short(self) -> str:
        """One-line description, e.g. ``dp2 tp2 pp1 mbs4x2 zero0 recompute=none 1f1b``."""
        s = f"dp{self.dp}" + (f" cp{self.cp}" if self.cp > 1 else "") + f" tp{self.tp} pp{self.pp}"
        if self.vp > 1:
            s += f" vp{self.vp}"
        s += f" mbs{self.mbs}x{self.num_microbatches} zero{self.zero} recompute={self.recompute_summary()}"
        if self.pp > 1:
            s += f" {self.schedule}"
        if self.sp:
            s += " sp"
        if self.grad_compression != "none":
            s += f" {self.grad_compression}-grads"
        if self.sync_every > 1:
            s += f" localsgd{self.sync_every}"
        return s

    def recompute_of(self, layer: str) -> str:
        return self.recompute_layers.get(layer, self.recompute)

    def recompute_summary(self) -> str:
        """``full`` for a uniform mode, else counts such as ``none:5+full:3``."""
        if not self.recompute_layers:
            return self.recompute
        counts: dict[str, int] = {}
        for n in (x for st in self.stages for x in st) if self.stages else self.recompute_layers:
            m = self.recompute_of(n)
            counts[m] = counts.get(m, 0) + 1
        if len(counts) == 1:
            return next(iter(counts))
        return "+".join(f"{m}:{counts[m]}" for m in RECOMPUTE if m in counts)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, source: str = "layout") -> "Layout":
        d = as_dict(d, f"{source}: layout")
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise InputError(f"{source}: unknown layout keys {short_repr(', '.join(sorted(map(str, unknown))), 80)}")
        stages = d.get("stages", [])
        if not isinstance(stages, list) or not all(isinstance(st, list) and all(isinstance(x, str) for x in st)
                                                   for st in stages):
            raise InputError(f"{source}: layout stages must be a list of lists of layer names")
        rl = d.get("recompute_layers", {})
        if not isinstance(rl, dict):
            raise InputError(f"{source}: recompute_layers must map layer names to modes")
        return cls(**{**{k: v for k, v in d.items() if k not in ("stages", "recompute_layers")},
                      "stages": [list(st) for st in stages], "recompute_layers": dict(rl)})

    def with_(self, **kw) -> "Layout":
        return replace(self, **kw)

    def check_against(self, world_size: int | None, layer_names: list[str] | None, global_batch: int | None = None,
                      heads: int | None = None, kv_heads: int | None = None, ffn_hidden: int | None = None) -> None:
        """Refuse a layout that does not divide the world, the batch or the model."""
        if world_size is not None and self.world_size != world_size:
            raise LayoutError(f"layout {self.world_formula(values=True)} = {self.world_size} "
                              f"does not match the world size {world_size}")
        if global_batch is not None and self.global_batch != global_batch:
            raise LayoutError(f"layout dp*mbs*num_microbatches = {self.global_batch} does not equal the "
                              f"global batch {global_batch}")
        why = (schedule_rule_violation(self.schedule, pp=self.pp, vp=self.vp, num_microbatches=self.num_microbatches)
               or data_parallel_rule_violation(dp=self.grad_group, zero=self.zero))
        if why:
            raise LayoutError(why)
        why = tp_violation(self.tp, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn_hidden)
        if why:
            raise LayoutError(why)
        if layer_names is not None:
            if self.pp * self.vp > len(layer_names):
                raise LayoutError(f"pp*vp = {self.pp * self.vp} stages but the model has only "
                                  f"{len(layer_names)} layers")
            if self.stages:
                flat = [n for st in self.stages for n in st]
                if flat != list(layer_names):
                    raise LayoutError("layout stages do not list the model's layers once each, in order")
                if any(not st for st in self.stages):
                    raise LayoutError("layout has an empty pipeline stage")


@dataclass
class Prediction:
    step_time_s: float
    peak_memory_bytes: int
    """the largest per-device peak over all devices"""
    breakdown_s: dict[str, float]
    memory_per_stage_bytes: list[int] = field(default_factory=list)
    """peak memory of a device of each pipeline rank"""
    memory_breakdown_bytes: dict[str, int] = field(default_factory=dict)
    """on the device with the peak: params, grads, optimizer, activations, buffers"""
    fits: bool = True
    throughput_samples_per_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, source: str = "predicted") -> "Prediction":
        """Check and load; a layout that does not fit may carry an infinite step time."""
        d = as_dict(d, source)
        fits = d.get("fits", True)
        if not isinstance(fits, bool):
            raise InputError(f"{source}.fits must be true or false, got {short_repr(fits)}")
        step = require(d, "step_time_s", source)
        if not (step == math.inf and not fits):
            step = as_float(step, f"{source}.step_time_s")
        return cls(step_time_s=step,
                   peak_memory_bytes=as_int(require(d, "peak_memory_bytes", source), f"{source}.peak_memory_bytes"),
                   breakdown_s={as_str(k, f"{source}.breakdown_s key"): as_float(v, f"{source}.breakdown_s.{k}")
                                for k, v in as_dict(d.get("breakdown_s", {}), f"{source}.breakdown_s").items()},
                   memory_per_stage_bytes=[as_int(x, f"{source}.memory_per_stage_bytes[]")
                                           for x in as_list(d.get("memory_per_stage_bytes", []),
                                                            f"{source}.memory_per_stage_bytes")],
                   memory_breakdown_bytes={as_str(k, f"{source}.memory_breakdown_bytes key"):
                                           as_int(v, f"{source}.memory_breakdown_bytes.{k}")
                                           for k, v in as_dict(d.get("memory_breakdown_bytes", {}),
                                                               f"{source}.memory_breakdown_bytes").items()},
                   fits=fits,
                   throughput_samples_per_s=as_float(d.get("throughput_samples_per_s", 0.0),
                                                     f"{source}.throughput_samples_per_s"))


@dataclass
class SolverInfo:
    status: str
    objective: float
    bound: float
    wall_s: float
    gap: float = 0.0
    layouts_considered: int = 0
    layouts_pruned: int = 0
    ilps_solved: int = 0

    @classmethod
    def from_dict(cls, d: dict, source: str = "solver") -> "SolverInfo":
        d = as_dict(d, source)
        _refuse_unknown(d, cls, source)

        def time_or_inf(key: str) -> float:      # an unsolved search has no objective or bound
            v = require(d, key, source)
            return v if v == math.inf else as_float(v, f"{source}.{key}")
        return cls(status=as_str(require(d, "status", source), f"{source}.status"),
                   objective=time_or_inf("objective"), bound=time_or_inf("bound"),
                   wall_s=as_float(require(d, "wall_s", source), f"{source}.wall_s"),
                   gap=time_or_inf("gap") if "gap" in d else 0.0,
                   layouts_considered=as_int(d.get("layouts_considered", 0), f"{source}.layouts_considered"),
                   layouts_pruned=as_int(d.get("layouts_pruned", 0), f"{source}.layouts_pruned"),
                   ilps_solved=as_int(d.get("ilps_solved", 0), f"{source}.ilps_solved"))


def _refuse_unknown(d: dict, cls: type, source: str) -> None:
    unknown = set(d) - set(cls.__dataclass_fields__)
    if unknown:
        raise InputError(f"{source}: unknown keys {short_repr(', '.join(sorted(map(str, unknown))), 80)}")


@dataclass
class Alternative:
    layout: Layout
    predicted: Prediction
    family: str = ""
    """e.g. "best without PP"; empty for a plain runner-up"""
    loses_on: str = ""
    """the cost term (or memory) that makes it lose to the chosen layout"""

    def to_dict(self) -> dict:
        return {"layout": self.layout.to_dict(), "predicted": self.predicted.to_dict(),
                "family": self.family, "loses_on": self.loses_on}


@dataclass
class TrainingSpec:
    """What is trained, as a plan file records it: the :class:`TrainingConfig` fields (batch, precision,
    optimizer, framework; flat, as the file format has them) with the model (enough for a training
    script to rebuild it from the plan alone) and the cluster it was planned for. Written by
    :meth:`Problem.training_spec <autoplan.plan.api.Problem.training_spec>`, read back by
    :meth:`Problem.from_plan <autoplan.plan.api.Problem.from_plan>` and :attr:`config`."""

    model_spec: str
    shape: dict | None
    global_batch: int
    seq_len: int
    precision: str = "fp32"
    optimizer: str = "adamw"
    model_profile: str = ""
    cluster_profile: str = ""
    cluster_spec: str = ""
    world_size: int = 1
    framework: str = "autoplan"
    """the framework the plan was made for (``--framework``, :mod:`autoplan.plan.frameworks`): its
    costs and rules; ``run`` and ``validate`` run only autoplan plans"""
    memory_per_device_bytes: int = 0
    """the device memory budget the plan was solved for, when given on the command line
    (``--memory-per-device``); 0: the cluster profile's own. An elastic re-plan uses it again."""

    @property
    def config(self) -> TrainingConfig:
        """What is trained, as the cost model takes it (the software stack is left to the profile:
        :func:`~autoplan.plan.api.make_problem` chooses it from the framework)."""
        return TrainingConfig(global_batch=self.global_batch, precision=self.precision, optimizer=self.optimizer,
                              framework=self.framework)

    @classmethod
    def from_dict(cls, d: dict, source: str = "training") -> "TrainingSpec":
        d = as_dict(d, source)
        _refuse_unknown(d, cls, source)
        shape = d.get("shape")
        if shape is not None:
            from autoplan.models.shapes import ModelShape
            ModelShape.from_dict(as_dict(shape, f"{source}.shape"), source=f"{source}.shape")
        from autoplan.profile.formats import MAX_SEQ_LEN
        precision = as_str(d.get("precision", "fp32"), f"{source}.precision")
        optimizer = as_str(d.get("optimizer", "adamw"), f"{source}.optimizer")
        why = choice_violation(precision=precision, optimizer=optimizer)
        if why:
            raise InputError(f"{source}.{why}")
        return cls(model_spec=as_str(require(d, "model_spec", source), f"{source}.model_spec"), shape=shape,
                   global_batch=as_int(require(d, "global_batch", source), f"{source}.global_batch", minimum=1,
                                       maximum=MAX_DEGREE),
                   seq_len=as_int(require(d, "seq_len", source), f"{source}.seq_len", minimum=1, maximum=MAX_SEQ_LEN),
                   precision=precision, optimizer=optimizer,
                   model_profile=as_str(d.get("model_profile", ""), f"{source}.model_profile"),
                   cluster_profile=as_str(d.get("cluster_profile", ""), f"{source}.cluster_profile"),
                   cluster_spec=as_str(d.get("cluster_spec", ""), f"{source}.cluster_spec"),
                   world_size=as_int(d.get("world_size", 1), f"{source}.world_size", minimum=1, maximum=MAX_DEGREE),
                   framework=_framework_spec(as_str(d.get("framework", "autoplan"), f"{source}.framework"), source),
                   memory_per_device_bytes=as_int(d.get("memory_per_device_bytes", 0),
                                                  f"{source}.memory_per_device_bytes"))


def _framework_spec(spec: str, source: str) -> str:
    """The canonical spec of a plan's framework (InputError for an unknown one)."""
    from autoplan.plan.frameworks import framework
    try:
        return framework(spec).spec
    except InputError as e:
        raise InputError(f"{source}.framework: {str(e).removeprefix('--framework: ')}") from None


@dataclass
class Plan:
    layout: Layout
    predicted: Prediction
    solver: SolverInfo
    training: TrainingSpec
    alternatives: list[Alternative] = field(default_factory=list)
    explanation: list[str] = field(default_factory=list)

    def other_degrees_alternative(self) -> tuple["Alternative", "Plan"] | None:
        """The first fitting alternative whose (dp, tp, pp) differ from the chosen layout's, and a
        plan that runs it (same training spec): what a side-by-side run compares against."""
        key = (self.layout.dp, self.layout.tp, self.layout.pp)
        for a in self.alternatives:
            if a.predicted.fits and a.layout.stages and (a.layout.dp, a.layout.tp, a.layout.pp) != key:
                return a, Plan(layout=a.layout, predicted=a.predicted, solver=self.solver, training=self.training)
        return None

    def to_dict(self) -> dict:
        return {
            "schema_version": PLAN_VERSION,
            "kind": "plan",
            "layout": self.layout.to_dict(),
            "predicted": self.predicted.to_dict(),
            "solver": asdict(self.solver),
            "training": asdict(self.training),
            "alternatives": [a.to_dict() for a in self.alternatives],
            "explanation": self.explanation,
        }

    def save(self, path) -> None:
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: dict, source: str = "plan") -> "Plan":
        """Check and load a plan; InputError or LayoutError (one line naming the field) otherwise."""
        check_schema(d, "plan", PLAN_VERSION, source)
        path, source = source, f"{source}: malformed plan"
        layout = Layout.from_dict(require(d, "layout", source), source)
        predicted = Prediction.from_dict(require(d, "predicted", source), f"{source}: predicted")
        solver = SolverInfo.from_dict(require(d, "solver", source), f"{source}: solver")
        training = TrainingSpec.from_dict(require(d, "training", source), f"{source}: training")
        alts = []
        for i, a in enumerate(as_list(d.get("alternatives", []), f"{source}: alternatives")):
            at = f"{source}: alternatives[{i}]"
            a = as_dict(a, at)
            alts.append(Alternative(layout=Layout.from_dict(require(a, "layout", at), at),
                                    predicted=Prediction.from_dict(require(a, "predicted", at), f"{at}.predicted"),
                                    family=as_str(a.get("family", ""), f"{at}.family"),
                                    loses_on=as_str(a.get("loses_on", ""), f"{at}.loses_on")))
        explanation = as_list(d.get("explanation", []), f"{source}: explanation")
        if not all(isinstance(x, str) for x in explanation):
            raise InputError(f"{source}: explanation must be a list of strings")
        if not layout.stages:
            raise InputError(f"{source}: plan layout has no stages")
        why = sequence_split_violation(training.seq_len, cp=layout.cp, tp=layout.tp, sp=layout.sp)
        if why:
            raise LayoutError(f"{path}: {why}")      # well formed, but not a layout the executor can run
        if training.world_size != layout.world_size:
            raise InputError(f"{source}: plan world_size {training.world_size} != {layout.world_formula()} "
                             f"{layout.world_size}")
        return cls(layout=layout, predicted=predicted, solver=solver, training=training,
                   alternatives=alts, explanation=list(explanation))

    @classmethod
    def load(cls, path) -> "Plan":
        return cls.from_dict(read_json(path, "plan"), source=str(path))

    def check_runnable_here(self) -> None:
        """InputError unless autoplan's executor is the framework the plan was made for: a plan made for
        another framework was costed with that framework's kernels, overlaps and memory rules."""
        from autoplan.plan.frameworks import framework
        if self.training.optimizer not in framework("autoplan").optimizers:
            raise InputError(f"this plan's optimizer {self.training.optimizer} is not one autoplan's executor runs")
        if self.training.framework.partition("@")[0] != "autoplan":
            raise InputError(f"this plan was made for --framework {self.training.framework}: autoplan runs plans made "
                             f"for its own executor (solve again with --framework autoplan, or export it: "
                             f"autoplan export PLAN --to {self.training.framework.partition('@')[0]})")


def sequence_split_violation(seq_len: int, *, cp: int = 1, tp: int = 1, sp: int = 0) -> str | None:
    """Why a layout cannot cut sequences of ``seq_len`` tokens as it asks, or None: context parallel
    splits each sequence into 2*cp equal chunks (load balance for the causal mask), and sequence
    parallel (sp=1) splits each rank's ``seq_len / cp`` tokens into ``tp`` equal shards (uneven shards
    fail in the executor's collectives: gloo refuses a message of another size)."""
    if cp > 1 and seq_len % (2 * cp):
        return (f"cp={cp} does not divide the sequence of {seq_len} tokens into 2*cp = {2 * cp} equal chunks "
                f"(context parallel balances the causal mask that way): choose a cp with seq_len % (2*cp) == 0")
    if sp and tp > 1 and (seq_len // cp) % tp:
        tokens = f"{seq_len // cp} tokens per context-parallel rank" if cp > 1 else f"sequence of {seq_len} tokens"
        return (f"sequence parallel (sp=1) with tp={tp} cannot split the {tokens} into {tp} equal shards: "
                f"choose sp=0 or a tp that divides {seq_len // cp}")
    return None
