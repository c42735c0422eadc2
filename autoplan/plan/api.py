"""The planner's front door: resolve model and cluster specs, then solve or estimate.

``solve`` and ``estimate`` share every step but the search, so a layout fixed with ``--layout``
is costed exactly as ``estimate`` costs it.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autoplan.errors import AutoplanWarning, InfeasibleError, InputError, LayoutError
from autoplan.jsonio import read_json
from autoplan.plan.coefficient_sources import in_group_advice, unmeasured_mbs_note
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.cost import evaluate
from autoplan.plan.training import TrainingConfig
from autoplan.plan.explain import explain, family_alternatives
from autoplan.plan.layout_input import (complete_layout, parse_layout_constraints,  # noqa: F401
                                         stages_from_block_counts)
from autoplan.plan.plan import Layout, Plan, Prediction, SolverInfo, TrainingSpec, sequence_split_violation, tp_parts
from autoplan.plan.frameworks import DEFAULT_FRAMEWORK, framework_violation
from autoplan.plan.frameworks import framework as framework_named
from autoplan.plan.search import SearchOptions, place, search
from autoplan.profile.assumptions import SoftwareStack
from autoplan.profile.hardware import GIB
from autoplan.profile.formats import ClusterProfile, ModelProfile, fp8_not_measured, is_fp8

ANALYTIC_MBS = (1, 2, 4, 8)
"""micro-batch sizes an analytic profile times exactly (others: :func:`autoplan.profile.formats.mbs_curve`)"""

if TYPE_CHECKING:    # importing the planner must not import torch
    from autoplan.models.source import ModelSource


@dataclass
class Problem:
    """A resolved planning problem: what to train, on what."""

    profile: ModelProfile
    cluster: ClusterProfile
    train: TrainingConfig
    model_spec: str
    cluster_spec: str
    memory_per_device_bytes: int | None = None
    """the budget given on the command line in place of the cluster profile's (recorded in the plan)"""
    model_source: ModelSource | None = None
    """``model_spec`` as :func:`make_problem` resolved it (None for a problem built in code): what the notes
    that advise measuring the profile ask of it, without reading its file again"""

    @classmethod
    def from_plan(cls, plan: Plan, *, model: str | None = None, cluster: str | None = None,
                  memory_per_device_bytes: int | None = None, plan_path: Path | None = None,
                  num_nodes: int | None = None) -> "Problem":
        """The planning problem ``plan`` was made for, from its ``training`` record: the model and
        cluster profile files it names (as given, else beside ``plan_path``) or their specs, the
        batch, sequence length, precision, optimizer, framework and memory budget. ``model``,
        ``cluster`` and ``memory_per_device_bytes`` replace the record's; ``num_nodes`` keeps the
        cluster's first nodes (:func:`restrict_cluster`, an elastic re-plan)."""
        tr, trained = plan.training, plan.training.config
        model = model or (beside_plan(tr.model_profile, plan_path) if tr.model_profile else tr.model_spec)
        cluster = cluster or (beside_plan(tr.cluster_profile, plan_path) if tr.cluster_profile else tr.cluster_spec)
        if not cluster:
            raise InputError("the plan does not say which cluster it was made for: give --cluster")
        for what, spec, opt in (("model profile", model, "--model"), ("cluster profile", cluster, "--cluster")):
            if spec.endswith(".json") and not Path(spec).exists():
                raise InputError(f"the plan's {what} {spec} is not there (paths are relative to where solve ran): "
                                 f"give {opt}")
        return make_problem(model, cluster, trained.global_batch, precision=trained.precision,
                            optimizer=trained.optimizer, seq_len=tr.seq_len, framework=trained.framework, num_nodes=num_nodes,
                            memory_per_device_bytes=memory_per_device_bytes or tr.memory_per_device_bytes or None)

    def plan(self, layout: Layout, predicted: Prediction, solver: SolverInfo, *,
             alternatives: list | None = None) -> Plan:
        """A plan of ``layout`` for this problem, with the training record for its world size."""
        return Plan(layout=layout, predicted=predicted, solver=solver, training=self.training_spec(layout.world_size),
                    alternatives=alternatives or [])

    def training_spec(self, world_size: int) -> TrainingSpec:
        """What the plan records of this problem (:attr:`Plan.training`), for ``world_size`` devices."""
        return TrainingSpec(model_spec=self.profile.model_spec or self.model_spec, shape=self.profile.shape,
                            global_batch=self.train.global_batch, seq_len=self.profile.seq_len,
                            precision=self.train.precision, optimizer=self.train.optimizer,
                            model_profile=self.model_spec if self.model_spec.endswith(".json") else "",
                            cluster_profile=self.cluster_spec if self.cluster_spec.endswith(".json") else "",
                            cluster_spec=self.cluster_spec, world_size=world_size, framework=self.train.framework,
                            memory_per_device_bytes=self.memory_per_device_bytes or 0)


def beside_plan(path: str, plan_path: Path | None) -> str:
    """A profile path recorded in a plan: as given (relative to the working directory), else
    relative to the plan file's directory."""
    if Path(path).exists() or plan_path is None:
        return path
    beside = plan_path.parent / path
    return str(beside) if beside.exists() else path


def restrict_cluster(cluster: ClusterProfile, num_nodes: int) -> ClusterProfile:
    """The cluster profile of the first ``num_nodes`` nodes: same device and link figures (the
    inter-node fits stay, used only while more than one node remains), hosts cut to match."""
    if not 1 <= num_nodes <= cluster.num_nodes:
        raise InputError(f"cannot restrict a {cluster.num_nodes}-node cluster profile to {num_nodes} nodes")
    world = num_nodes * cluster.devices_per_node
    return replace(cluster, name=f"{cluster.name} (first {num_nodes} of {cluster.num_nodes} nodes)",
                   num_nodes=num_nodes, rank_hosts=cluster.rank_hosts[:world],
                   device=replace(cluster.device))


def resolve_cluster(spec: str) -> ClusterProfile:
    """A cluster profile JSON file, or a catalogue entry ``name:nodes`` (e.g. ``dgx-a100-80gb:16``)."""
    p = Path(spec)
    if p.suffix == ".json" or p.exists():
        return ClusterProfile.load(p)
    from autoplan.profile.hardware import catalogue_cluster
    return catalogue_cluster(spec)


def resolve_model_profile(model: ModelSource, cluster: ClusterProfile, *, precision: str, seq_len: int | None = None,
                          progress: Callable | None = None, stack: SoftwareStack | None = None,
                          mbs_list: tuple[int, ...] = ANALYTIC_MBS) -> ModelProfile:
    """The planner's profile of ``model`` (:func:`autoplan.models.source.resolve_model`)::

        a model profile JSON       taken as it is (``seq_len`` must be the one it was made at)
        on a catalogue cluster     analytic, from the shape, for the software ``stack`` (default
                                   autoplan's executor) at micro-batch sizes ``mbs_list`` (built-in, shape JSON, ``hf:``; an ``hf:``
                                   profile's layers named as the adapter's units); a factory model has
                                   no shape: profile it on the target device and pass the JSON
        on a measured cluster      measured on this machine (:func:`autoplan.profile.layers.profile_model`)
    """
    if model.form == "profile_file":
        prof = (ModelProfile.from_dict(model.profile_json, source=str(model.path)) if model.profile_json is not None
                else ModelProfile.load(model.path))
        if seq_len is not None and seq_len != prof.seq_len:
            raise InputError(f"--seq-len {seq_len} differs from the {prof.seq_len} the profile {model.path} "
                             f"was measured at")
        return prof
    if cluster.source == "catalogue":
        from autoplan.profile.analytic import analytic_model_profile
        shape = model.shape
        if shape is None:
            raise InputError(f"model {model.spec!r} has no analytic profile for catalogue cluster {cluster.name!r}: "
                             f"measure it on the target device (autoplan profile model --model {model.spec} "
                             f"--device cuda --out model.json) and pass that JSON")
        if seq_len is not None and seq_len != shape.seq_len:
            shape = replace(shape, seq_len=seq_len)
        prof = analytic_model_profile(shape, cluster, precision=precision, mbs_list=mbs_list,
                                      **({"stack": stack} if stack is not None else {}))
        if model.form == "hf":
            prof.model_spec = model.spec
        return prof
    from autoplan.profile.layers import profile_model
    return profile_model(model, seq_len=seq_len, progress=progress, precision=precision,
                         device=measuring_device(cluster))


def measuring_device(cluster: ClusterProfile) -> str:
    """Where a model is measured on the fly for a measured cluster: its GPU when the cluster is one
    of CUDA devices and this process sees CUDA, else the CPU.  A CUDA cluster planned where there is
    no CUDA is an InputError: this machine's CPU times would stand for the GPUs' (about 1000x slow)."""
    if cluster.device.type == "cuda":
        import torch
        if torch.cuda.is_available():
            return "cuda"
        raise InputError(f"the cluster profile is of CUDA devices ({cluster.device.name or 'cuda'}) but this machine "
                         f"has no CUDA to measure the model on: measure it where the GPUs are (autoplan profile model "
                         f"--device cuda --out model.json) and pass --model model.json")
    return "cpu"


def _profile_file_precision(model: ModelSource) -> str | None:
    """The precision a model profile JSON was made in; None when ``model`` is not a profile file."""
    if model.form != "profile_file":
        return None
    d = model.profile_json if model.profile_json is not None else read_json(model.path, "model")
    return str(d.get("precision", ""))


def check_profile_precision(profile: ModelProfile, precision: str, spec: str) -> None:
    """InputError unless ``profile`` was made in ``precision``: step times and activation bytes
    differ several-fold between fp32 and 16-bit mixed precision, so a profile of one cannot plan the other."""
    if profile.precision != precision:
        how = ("measure it again: autoplan profile model --precision " + precision
               if profile.source == "measured" else f"give --precision {profile.precision}")
        if is_fp8(precision) and profile.source == "measured":
            how = fp8_not_measured(precision)
        raise InputError(f"model profile {spec} was {profile.source} in {profile.precision} but the plan trains in "
                         f"{precision}: {how}")


def make_problem(model: str | ModelSource, cluster: str, global_batch: int, *, precision: str | None = None,
                 optimizer: str = "adamw", seq_len: int | None = None, memory_per_device_bytes: int | None = None,
                 progress: Callable | None = None, framework: str = DEFAULT_FRAMEWORK,
                 micro_batch_sizes: tuple[int, ...] = (), num_nodes: int | None = None) -> Problem:
    """Resolve the specs (``model`` once, by :func:`autoplan.models.source.resolve_model`). ``precision``
    defaults to a model profile file's own, else bf16 on CUDA and catalogue clusters, fp32 on CPU; a
    profile file of another precision is refused.  ``framework`` (:mod:`autoplan.plan.frameworks`):
    the software that will run the plan; a framework other than autoplan's executor is costed on
    catalogue clusters (its kernels and overlaps are modelled analytically), a measured profile
    describes autoplan's executor.  ``micro_batch_sizes``: sizes an analytic profile times exactly
    besides 1, 2, 4, 8 (e.g. the one a ``--layout`` fixes). ``num_nodes``: plan for the cluster's
    first nodes only (:func:`restrict_cluster`)."""
    fw = framework_named(framework)
    from autoplan.models.source import as_model_source
    from autoplan.profile.formats import MAX_SEQ_LEN
    TrainingConfig(global_batch=global_batch, precision=precision or "fp32", optimizer=optimizer)  # bad input, early
    if seq_len is not None and not 1 <= seq_len <= MAX_SEQ_LEN:
        raise InputError(f"--seq-len must be from 1 to {MAX_SEQ_LEN}, got {seq_len}")
    if memory_per_device_bytes is not None and memory_per_device_bytes <= 0:
        raise InputError(f"the memory per device must be positive, got {memory_per_device_bytes} bytes")
    try:
        cl = resolve_cluster(cluster)
    except InputError as cluster_error:
        try:       # both missing (a first try, in the wrong folder): name both in the one line
            as_model_source(model)
        except InputError as model_error:
            raise InputError(f"{model_error}; and {cluster_error}") from None
        raise
    if num_nodes is not None:
        cl = restrict_cluster(cl, num_nodes)
    if memory_per_device_bytes is not None:
        cl.device.memory_bytes = memory_per_device_bytes
    source = as_model_source(model)
    if precision is None:
        precision = _profile_file_precision(source) or (
            "bf16" if cl.device.type == "cuda" or cl.source == "catalogue" else "fp32")
    if fw.name != "autoplan" and cl.source != "catalogue":
        raise InputError(f"--framework {fw.spec} is costed on catalogue clusters (dgx-a100-80gb:N, dgx-h100-80gb:N, "
                         f"...): a measured cluster runs autoplan's executor; use --framework autoplan")
    why = framework_violation(fw, {}, precision or "bf16", chip=_chip(cl), optimizer=optimizer)
    if why:
        raise InputError(why)
    analytic = cl.source == "catalogue" and source.form != "profile_file"
    mbs_list = tuple(sorted(set(ANALYTIC_MBS) | {b for b in micro_batch_sizes if b >= 1}))
    prof = resolve_model_profile(source, cl, precision=precision, seq_len=seq_len, progress=progress,
                                 stack=fw.stack if analytic else None, mbs_list=mbs_list)
    check_profile_precision(prof, precision, source.spec)
    advice = in_group_advice(prof, cl, source)
    if advice:
        warnings.warn(advice, AutoplanWarning, stacklevel=2)
    stack = fw.stack if prof.source == "analytic" else None
    return Problem(prof, cl, TrainingConfig(global_batch=global_batch, precision=precision, optimizer=optimizer,
                                            stack=stack, framework=fw.spec),
                   source.spec, cluster, memory_per_device_bytes, model_source=source)


def fixed_micro_batch(given: dict) -> tuple[int, ...]:
    """The micro-batch size a ``--layout`` fixes, for an analytic profile to time exactly (``make_problem``)."""
    return (given["mbs"],) if given.get("mbs") else ()


def _chip(cluster: ClusterProfile) -> str:
    """The accelerator family of a cluster's devices (``H100``...), or its device type."""
    from autoplan.profile.hardware import accelerator_of
    acc = accelerator_of(cluster.device.name)
    return acc.family if acc is not None and acc.family else (cluster.device.name or cluster.device.type)


GIVEN_PLACEMENT_KEYS = ("recompute_every", "recompute_first", "stage_blocks")
"""``--layout`` fields that place or recompute given blocks: with one of them ``solve`` searches
nothing, it costs the layout as given (completed as ``estimate`` completes it)"""


def _given_plan(pb: Problem, fixed: dict) -> Plan:
    """A layout with per-block recompute or stage sizes (Megatron's ``--recompute-method block``, a
    published uneven partition): costed as given, as ``estimate`` does; InfeasibleError if it does
    not fit."""
    t0 = time.perf_counter()
    layout, pred = estimate_problem(pb, given_layout(pb, fixed))
    if not pred.fits:
        raise InfeasibleError(f"the given layout {layout.short()} needs {pred.peak_memory_bytes / GIB:.1f} GiB per "
                              f"device, more than the {pb.cluster.device.memory_bytes / GIB:.1f} GiB there",
                              min_memory_bytes=pred.peak_memory_bytes, smallest_layout=layout)
    solver = SolverInfo(status="given", objective=pred.step_time_s, bound=pred.step_time_s,
                        wall_s=time.perf_counter() - t0, layouts_considered=1)
    plan = pb.plan(layout, pred, solver)
    plan.explanation = explain(plan)
    return plan


def solve_problem(pb: Problem, opts: SearchOptions | None = None, *, families: bool = True,
                  progress: Callable[[int, int], None] | None = None) -> Plan:
    opts = opts or SearchOptions()
    if any(k in opts.fixed for k in GIVEN_PLACEMENT_KEYS):
        return _given_plan(pb, opts.fixed)
    res = search(pb.profile, pb.cluster, pb.train, opts, progress=progress)
    chosen = res.best[0]
    alts = [] if not families else family_alternatives(pb.profile, pb.cluster, pb.train, opts, chosen, res.best)
    plan = pb.plan(chosen.layout, chosen.predicted, res.solver, alternatives=alts)
    plan.explanation = explain(plan)
    note = unmeasured_mbs_note(pb.profile, pb.cluster, pb.model_source or pb.model_spec,
                               chosen.layout.mbs)
    if note:
        plan.explanation.append(note)
    return plan


def solve(model: str, cluster: str, global_batch: int, *, layout: str | dict | None = None,
          precision: str | None = None, optimizer: str = "adamw", seq_len: int | None = None,
          memory_per_device_bytes: int | None = None, options: SearchOptions | None = None,
          framework: str = DEFAULT_FRAMEWORK) -> Plan:
    """Choose the layout with the least predicted step time that fits every device, for the software
    ``framework`` (:mod:`autoplan.plan.frameworks`) that will run it."""
    fixed = parse_layout_constraints(layout) if isinstance(layout, str) else dict(layout or {})
    pb = make_problem(model, cluster, global_batch, precision=precision, optimizer=optimizer, seq_len=seq_len,
                      memory_per_device_bytes=memory_per_device_bytes, framework=framework,
                      micro_batch_sizes=fixed_micro_batch(fixed))
    opts = options or SearchOptions()
    opts.fixed = {**opts.fixed, **fixed}
    return solve_problem(pb, opts)


def estimate_problem(pb: Problem, layout: Layout) -> tuple[Layout, Prediction]:
    """Cost one complete layout; without stages, the solver's partitioner places the layers."""
    layout.check_against(pb.cluster.world_size, None, pb.train.global_batch, **tp_parts(pb.profile.shape))
    names = pb.profile.layer_names()
    if layout.pp * layout.vp > len(names):
        raise LayoutError(f"pp*vp = {layout.pp * layout.vp} stages but the model has only {len(names)} layers")
    costs = layer_costs(pb.profile, pb.cluster, layout, pb.train)
    if not layout.stages:
        placed, _, _ = place(pb.profile, pb.cluster, layout, pb.train, costs)
        if placed is None:   # no placement fits: report the one that needs the least memory
            placed, status, _ = place(pb.profile, pb.cluster, layout, pb.train, costs, objective="memory")
            if placed is None:
                raise LayoutError(f"no placement of the layers on {layout.pp * layout.vp} pipeline chunks was found "
                                  f"(the solver says {status}): give the stages")
        layout = placed
    return layout, evaluate(pb.profile, pb.cluster, layout, pb.train, costs)


def estimate(model: str, cluster: str, global_batch: int, layout: str | dict, *, precision: str | None = None,
             optimizer: str = "adamw", seq_len: int | None = None,
             memory_per_device_bytes: int | None = None,
             framework: str = DEFAULT_FRAMEWORK) -> tuple[Layout, Prediction]:
    """Predicted step time and memory of one given layout (see ``complete_layout`` for defaults) when
    ``framework`` runs it.  ``autoplan estimate`` is this function."""
    given = parse_layout_constraints(layout) if isinstance(layout, str) else dict(layout)
    pb = make_problem(model, cluster, global_batch, precision=precision, optimizer=optimizer, seq_len=seq_len,
                      memory_per_device_bytes=memory_per_device_bytes, framework=framework,
                      micro_batch_sizes=fixed_micro_batch(given))
    return estimate_problem(pb, given_layout(pb, given))


def _per_block_recompute(profile: ModelProfile, every: int, first: int) -> dict[str, str]:
    """Full recompute of every ``every``-th transformer block (torchtitan's selective-layer activation
    checkpointing) or of the first ``first`` blocks (Megatron's ``--recompute-method block
    --recompute-num-layers``), the other blocks keeping the layout's ``recompute``."""
    if every < 0 or first < 0:
        raise LayoutError("recompute_every and recompute_first must be positive block counts")
    blocks = [n for n in profile.layer_names() if n.startswith("block.")]
    if first > len(blocks):
        raise LayoutError(f"recompute_first={first} but the model has {len(blocks)} blocks")
    return {n: "full" for i, n in enumerate(blocks) if (every and i % every == 0) or i < first}


def given_layout(pb: Problem, given: dict) -> Layout:
    """``complete_layout`` for this problem, with ``stage_blocks`` (blocks per pipeline chunk, for a
    published uneven partition) turned into stages."""
    why = sequence_split_violation(pb.profile.seq_len, cp=given.get("cp", 1))    # before the degrees' checks
    if why:
        raise LayoutError(why)
    given = dict(given)
    every, first = given.pop("recompute_every", 0), given.pop("recompute_first", 0)
    per_block = _per_block_recompute(pb.profile, every, first)
    lay = complete_layout(given, pb.cluster.world_size, pb.train.global_batch)
    why = sequence_split_violation(pb.profile.seq_len, cp=lay.cp, tp=lay.tp, sp=lay.sp)
    if why:
        raise LayoutError(why)
    if per_block:
        if lay.pp > 1 and first:
            raise LayoutError("recompute_first counts the model's first blocks: it needs pp=1")
        lay = lay.with_(recompute_layers=per_block)
    why = framework_violation(framework_named(pb.train.framework), lay, pb.train.precision, _chip(pb.cluster))
    if why:
        raise LayoutError(why)
    if given.get("stage_blocks"):
        counts = list(given["stage_blocks"])
        if len(counts) != lay.pp * lay.vp:
            raise LayoutError(f"stage_blocks lists {len(counts)} stages but pp*vp = {lay.pp * lay.vp}")
        lay = lay.with_(stages=stages_from_block_counts(pb.profile.layer_names(), counts))
    return lay
