"""Outer search: enumerate the discrete layout choices, bound them, and solve the placement ILP
for the ones that can still win.

For every outer layout (dp, tp, pp, vp, mbs, m, zero, recompute, schedule, sp) with
dp*tp*pp = world size and dp*mbs*m = global batch, a lower bound on its step time is computed
from the per-layer coefficients alone (perfect balance, no pipeline sends). Candidates are visited
in order of that bound; once the bound of the next one exceeds the k-th best step time found, the
rest are skipped. pp = 1 needs no ILP (one stage holds everything).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal, get_args


from autoplan.errors import AutoplanError, InfeasibleError, InputError, LayoutError
from autoplan.plan.coefficients import LayerCost, layer_costs
from autoplan.plan.cost import evaluate
from autoplan.plan.memory import transient_bytes
from autoplan.plan.schedules import SCHEDULES, grads_made_with, inflight_microbatches, schedule_rule_violation
from autoplan.plan.training import TrainingConfig
from autoplan.plan.frameworks import framework as framework_named
from autoplan.plan.frameworks import framework_violation
from autoplan.plan.graph import build_layer_graph, is_chain
from autoplan.plan.ilp import TiedChainILP, resolve_solver, solve_placement, tied_chain
from autoplan.models.shapes import tp_violation
from autoplan.plan.layout_input import complete_layout, device_count_violation
from autoplan.plan.plan import RECOMPUTE, Layout, Prediction, SolverInfo, sequence_split_violation, tp_parts
from autoplan.plan.tied import TiedChain
from autoplan.profile.formats import ClusterProfile, ModelProfile


LossyOption = Literal["fp16", "powersgd", "localsgd"]
LOSSY_OPTIONS: tuple[LossyOption, ...] = get_args(LossyOption)
MAX_TOP_K = 100
MAX_TIME_LIMIT_S = 86400.0


@dataclass
class SearchOptions:
    """Which layouts the search may consider (each narrows the space; ``fixed`` pins fields).
    Checked when made: the Python API refuses what ``autoplan solve`` refuses (InputError)."""

    fixed: dict = field(default_factory=dict)
    """layout fields pinned by the user (``--layout``), e.g. {"tp": 2, "pp": 2}"""
    zero: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[str, ...] = RECOMPUTE
    schedules: tuple[str, ...] = SCHEDULES
    max_vp: int = 4
    """largest number of virtual stages per pipeline rank for the interleaved schedule"""
    tp_within_node: bool = True
    """keep tensor parallel inside a node (its collectives are on the critical path)"""
    per_layer_recompute: bool = False
    """also let the placement ILP choose each block's recompute mode per pipeline rank (chains of
    identical blocks: the tied formulation), for degrees where no recomputation does not fit.
    The per-rank relaxation (tied.py) prunes most such layouts and cuts the ILP of the rest."""
    allow_lossy: tuple[LossyOption, ...] = ()
    """opt-in options that change the mathematics of training, for plain DDP layouts:
    ``fp16`` / ``powersgd`` gradient compression, ``localsgd`` (parameter averaging every
    ``local_sgd_periods`` steps). Empty: exact training only."""
    local_sgd_periods: tuple[int, ...] = (2, 4, 8)
    prune_dominated: bool = True
    """skip variants that the cost model never prefers: GPipe where 1F1B runs (same time, more
    memory), ZeRO-1 (the executor runs it as ZeRO-2: same traffic, and the model counts no less memory).
    Fields the user pins in ``fixed`` are always honoured."""
    cp_degrees: tuple[int, ...] | None = None
    """context-parallel degrees to try (where the framework has context parallel and the sequence
    splits into 2*cp chunks); a degree fixed in ``fixed`` is always tried.  None (default): 1, 2, 4,
    8, 16 and 32 for sequences of at least :data:`CP_SEARCH_MIN_SEQ_LEN` tokens, else only 1 (each cp
    degree multiplies the outer space, and below 8K tokens published recipes do not use it)"""
    top_k: int = 5
    """layouts to keep: the best and runner-ups among those the search solved (0 or 1: the best only)"""
    ilp_time_limit_s: float = 10.0
    """wall-clock backstop per placement ILP; its node limit (:func:`autoplan.plan.ilp.node_limit`)
    follows from it and is what stops a solve, the same way on any machine"""
    mixed_recompute_time_limit_s: float = 2.0
    """solver time limit for ILPs that also choose per-block recompute (the gap is reported)"""
    gap_rel: float = 1e-6
    """relative optimality gap at which the ILP solver may stop"""
    formulation: Literal["auto", "tied", "cuts", "assignment"] = "auto"
    """placement ILP: cuts (chains), assignment (any DAG) or auto"""
    solver: Literal["auto", "highs", "cbc"] = "auto"
    """ILP solver: highs, cbc, or auto (HiGHS when highspy is installed, else CBC)"""

    def __post_init__(self) -> None:
        self.allow_lossy = tuple(self.allow_lossy)
        unknown = set(self.allow_lossy) - set(LOSSY_OPTIONS)
        if unknown:
            raise InputError(f"--allow-lossy: unknown option(s) {', '.join(sorted(map(str, unknown)))} "
                             f"(known: {', '.join(LOSSY_OPTIONS)})")
        if not 0 <= self.top_k <= MAX_TOP_K:
            raise InputError(f"--top-k must be from 0 to {MAX_TOP_K}, got {self.top_k}")
        if not 0 < self.ilp_time_limit_s <= MAX_TIME_LIMIT_S:      # also refuses nan
            raise InputError(f"--time-limit must be > 0 and at most {MAX_TIME_LIMIT_S:g} seconds, "
                             f"got {self.ilp_time_limit_s}")
        resolve_solver(self.solver)    # an unknown or unavailable solver is bad input, before any solving


@dataclass
class Candidate:
    layout: Layout
    predicted: Prediction
    ilp_status: str = "n/a"
    bound: float = 0.0


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def allowed_tp(profile: ModelProfile) -> set[int] | None:
    """TP degrees that divide heads, KV heads and the MLP width (None: no shape, any)."""
    sh = profile.shape
    if not sh:
        return None
    return {t for t in divisors(int(sh["heads"])) if tp_violation(t, **tp_parts(sh)) is None}


CP_SEARCH_MIN_SEQ_LEN = 8192
"""the shortest sequence for which ``solve`` searches context parallel by default (NeMo's and Llama 3's
recipes turn it on from 8K tokens; below, it is tried only when ``--layout`` fixes it)"""


def cp_degrees_searched(opts: SearchOptions, seq_len: int) -> tuple[int, ...]:
    """The cp degrees the search tries (:attr:`SearchOptions.cp_degrees`)."""
    if opts.cp_degrees is not None:
        return opts.cp_degrees
    return (1, 2, 4, 8, 16, 32) if seq_len >= CP_SEARCH_MIN_SEQ_LEN else (1,)


def outer_layouts(profile: ModelProfile, cluster: ClusterProfile, train: TrainingConfig,
                  opts: SearchOptions) -> Iterator[Layout]:
    """Every outer layout (no stages) the options allow, valid for the world, batch and model."""
    world = cluster.world_size
    f = opts.fixed
    n_layers = len(profile.layers)
    fw = framework_named(train.framework)
    cps = cp_degrees_searched(opts, profile.seq_len)
    any_shardable = any(k.tp_shardable for k in profile.kinds.values())
    tps = allowed_tp(profile)
    for tp in divisors(world):
        if tp > 1 and (not any_shardable or (tps is not None and tp not in tps)):
            continue
        if opts.tp_within_node and tp > cluster.devices_per_node and "tp" not in f:
            continue
        for pp, cp in ((pp, cp) for pp in divisors(world // tp) for cp in divisors(world // (tp * pp))):
            if pp > n_layers or cp not in cps and "cp" not in f \
                    or (cp > 1 and (not fw.context_parallel or sequence_split_violation(profile.seq_len, cp=cp))):
                continue
            dp = world // (tp * pp * cp)
            if train.global_batch % dp:
                continue
            per_replica = train.global_batch // dp
            for mbs in divisors(per_replica):
                m = per_replica // mbs
                for schedule, vp in _schedules(pp, m, n_layers, opts):
                    if (opts.prune_dominated and schedule == "gpipe" and m >= pp and "1f1b" in opts.schedules
                            and "schedule" not in f):
                        continue
                    zeros = opts.zero if dp * cp > 1 else (0,)
                    if opts.prune_dominated and "zero" not in f and 2 in zeros and 2 in fw.zero_levels:
                        zeros = tuple(z for z in zeros if z != 1)
                    sp_splits = tp > 1 and not sequence_split_violation(profile.seq_len, cp=cp, tp=tp, sp=1)
                    sps = (0, 1) if sp_splits else (0,)
                    for zero in zeros:
                        for recompute in opts.recompute:
                            for sp in sps:
                                lay = dict(dp=dp, tp=tp, pp=pp, vp=vp, mbs=mbs, num_microbatches=m, zero=zero,
                                           recompute=recompute, schedule=schedule, sp=sp, cp=cp)
                                for lossy in _lossy_variants(lay, opts):
                                    lay2 = {**lay, **lossy}
                                    if all(lay2.get(k, 1 if k in ("sync_every", "cp") else "none") == v
                                           for k, v in f.items() if k != "stages") \
                                            and framework_violation(fw, lay2, train.precision) is None:
                                        yield Layout(**lay2)


def _lossy_variants(lay: dict, opts: SearchOptions) -> list[dict]:
    """The exact layout, plus the lossy options the user allowed where they apply (plain DDP)."""
    out: list[dict] = [{}]
    if not opts.allow_lossy or not (lay["dp"] > 1 and lay["tp"] == 1 and lay["pp"] == 1 and lay["zero"] == 0
                                    and lay["cp"] == 1):
        return out
    for name in opts.allow_lossy:
        if name in ("fp16", "powersgd"):
            out.append({"grad_compression": name})
        elif name == "localsgd":
            out += [{"sync_every": h} for h in opts.local_sgd_periods if h > 1]
    return out


def _schedules(pp: int, m: int, n_layers: int, opts: SearchOptions) -> Iterator[tuple[str, int]]:
    """(schedule, vp) pairs that torch.distributed.pipelining can run for pp ranks and m micro-batches
    (:func:`autoplan.plan.schedules.schedule_rule_violation`). Interleaving is tried for vp = 2..max_vp,
    or for the user's fixed vp whatever its size (e.g. a published vp=6 recipe)."""
    if pp == 1:
        yield "1f1b", 1
        return
    for schedule in ("gpipe", "1f1b"):
        if schedule in opts.schedules and not schedule_rule_violation(schedule, pp=pp, vp=1, num_microbatches=m):
            yield schedule, 1
    if "interleaved" in opts.schedules:
        fixed_vp = opts.fixed.get("vp")
        vps = range(2, opts.max_vp + 1) if fixed_vp is None else [fixed_vp]
        for vp in vps:
            if pp * vp <= n_layers and not schedule_rule_violation("interleaved", pp=pp, vp=vp, num_microbatches=m):
                yield "interleaved", vp


def distinct_costs(costs: dict[str, LayerCost]) -> list[tuple[LayerCost, int]]:
    """Each distinct coefficient set once with the number of layers that have it (layers of one
    kind share one LayerCost instance): sums over layers at the cost of a few kinds."""
    seen: dict[int, list] = {}
    for c in costs.values():
        entry = seen.get(id(c))
        if entry is None:
            seen[id(c)] = [c, 1]
        else:
            entry[1] += 1
    return [(c, k) for c, k in seen.values()]


def lower_bound_s(costs: dict[str, LayerCost], layout: Layout, relief_floor: float = 1.0) -> float:
    """A step time no placement can beat: perfect balance and no pipeline sends, and the pipeline
    at the smallest shared-device relief ``relief_floor`` (:func:`autoplan.plan.schedules.shared_device_relief`)."""
    p, v, m = layout.pp, layout.vp, layout.num_microbatches
    kinds = distinct_costs(costs)
    # every one of the S-1 boundaries sends at least the cheapest layer output
    sends = (p * v - 1) * min(x.p2p_s for x, _ in kinds)
    total = sum(x.per_microbatch_s * k for x, k in kinds) + sends
    t_max = max(total / p, max(x.per_microbatch_s for x, _ in kinds) if p * v == len(costs) else 0.0)
    dps = sum(x.dp_sync_s * k for x, k in kinds)
    opt = sum(x.optimizer_s * k for x, k in kinds)
    relief = relief_floor if p > 1 else 1.0
    return ((m - 1.0 / v) * t_max + total / v) * relief + dps / p + opt / p


def memory_lower_bound_bytes(costs: dict[str, LayerCost], layout: Layout) -> float:
    """Per-device memory no placement can beat: static state and activations spread perfectly
    (activations at the smallest in-flight count of any rank; without the gradients backward makes
    unless every rank has a moment holding that many with its gradients made)."""
    kinds = distinct_costs(costs)
    k = min(inflight_microbatches(layout, r) for r in range(layout.pp))
    made = all(grads_made_with(layout, r, k) for r in range(layout.pp))
    static = sum((x.static_bytes - (0 if made else x.late_grad_bytes)) * n for x, n in kinds)
    act = sum(x.act_bytes * n for x, n in kinds)
    per_layer = max(x.static_bytes - (0 if made else x.late_grad_bytes) + k * x.act_bytes for x, _ in kinds)
    # the workspace depends on the largest layers only: one of each kind gives the same figure;
    # without the largest output's gradient, which only the last rank needs to hold the logits'
    one_each = {str(i): x for i, (x, _) in enumerate(kinds)}
    # and without ZeRO-3's root unit, which a pipeline rank may not hold
    return max((static + k * act) / layout.pp, per_layer) + transient_bytes(one_each, layout, without=one_each,
                                                                             root_bytes=0)


def place(profile: ModelProfile, cluster: ClusterProfile, layout: Layout, train: TrainingConfig,
          costs: dict[str, LayerCost], *, objective: str = "time", time_limit_s: float = 10.0,
          formulation: str = "auto", mode_costs: dict[str, dict[str, LayerCost]] | None = None,
          gap_rel: float = 1e-6, solver: str = "auto", incumbent_s: float | None = None,
          chain: TiedChain | None = None) -> tuple[Layout | None, str, float]:
    """The best stages for an outer layout: (layout with stages or None, status, bound). With
    ``mode_costs`` the ILP also chooses each block's recompute mode. ``incumbent_s``: a step time
    (without the calibrated overhead) to beat; status "cutoff" when no placement does."""
    names = profile.layer_names()
    if layout.pp * layout.vp == 1 and not mode_costs:
        full = layout.with_(stages=[names])
        return full, "n/a", 0.0
    g = build_layer_graph(profile, costs)
    usable = cluster.device.memory_bytes - cluster.calibration.memory_overhead_bytes
    res = solve_placement(g, layout, usable, objective=objective, time_limit_s=time_limit_s, formulation=formulation,
                          mode_costs=mode_costs, gap_rel=gap_rel, solver=solver, incumbent=incumbent_s, chain=chain)
    if res.status in ("infeasible", "timeout", "cutoff"):
        return None, res.status, res.bound
    placed = layout.with_(stages=res.stages)
    if res.recompute_layers:
        modes = set(res.recompute_layers.values())
        placed = (placed.with_(recompute=modes.pop()) if len(modes) == 1
                  else placed.with_(recompute_layers=res.recompute_layers))
    return placed, res.status, res.bound


def per_layer_applies(profile: ModelProfile, layout: Layout, costs: dict[str, LayerCost], opts: SearchOptions,
                      chain_graph: bool) -> bool:
    """Whether the ILP may choose modes per block for this layout: a chain (``chain_graph``) of
    identical blocks, several modes allowed, recompute not pinned by the user."""
    return (opts.per_layer_recompute and chain_graph and layout.recompute == "none" and len(opts.recompute) >= 2
            and "recompute" not in opts.fixed and TiedChainILP.tied_blocks(profile.layer_names(), costs))


def per_layer_mode_costs(profile: ModelProfile, cluster: ClusterProfile, layout: Layout, train: TrainingConfig,
                         costs: dict[str, LayerCost], opts: SearchOptions) -> dict[str, dict[str, LayerCost]]:
    """Costs under each recompute mode the ILP may choose per block (``costs``: recompute none)."""
    return {m: (costs if m == "none" else layer_costs(profile, cluster, layout, train, recompute=m))
            for m in opts.recompute}


@dataclass
class _Outer:
    """An outer layout to visit, with its time lower bound. ``per_layer``: the same degrees with
    recompute chosen per block by the ILP (its mode costs and memory bound are computed when
    visited: most are pruned before)."""

    lb_s: float
    layout: Layout
    costs: dict[str, LayerCost]
    mem_lb_bytes: float | None = None
    per_layer: bool = False
    modes: dict[str, dict[str, LayerCost]] | None = None


def _tiebreak(c: Candidate) -> tuple:
    lay = c.layout
    return (round(c.predicted.step_time_s, 12), lay.lossy, c.predicted.peak_memory_bytes, lay.pp, lay.tp, lay.zero,
            RECOMPUTE.index(lay.recompute), len(lay.recompute_layers), lay.vp, lay.sp, -lay.mbs)


def _outer_key(lay: Layout) -> tuple:
    return (lay.dp, lay.cp, lay.tp, lay.pp, lay.vp, lay.mbs, lay.num_microbatches, lay.zero, lay.schedule, lay.sp,
            lay.grad_compression, lay.sync_every)


def _degrees(lay: Layout) -> tuple:
    return lay.dp, lay.cp, lay.tp, lay.pp, lay.vp, lay.mbs, lay.schedule, lay.grad_compression, lay.sync_every


@dataclass
class SearchResult:
    best: list[Candidate]
    """the top-k fitting layouts, best first"""
    solver: SolverInfo
    smallest_memory: tuple[Layout, int] | None = None
    """when nothing fits: the layout needing the least memory per device and that amount"""


def search(profile: ModelProfile, cluster: ClusterProfile, train: TrainingConfig, opts: SearchOptions,
           progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Find the top-k layouts. Raises InfeasibleError (with the smallest need) if none fits."""
    t0 = time.perf_counter()
    world = cluster.world_size
    fixed = opts.fixed
    for k in ("recompute_every", "recompute_first", "stage_blocks"):
        if k in fixed:
            raise InputError(f"--layout {k} places or recomputes given blocks: the search chooses them (see "
                             f"--per-layer-recompute); solve and estimate cost such a layout as given")
    why = sequence_split_violation(profile.seq_len, cp=fixed.get("cp", 1), tp=fixed.get("tp", 1),
                                   sp=fixed.get("sp", 0))
    if why:
        raise LayoutError(why)
    why = all(k in fixed for k in ("dp", "tp", "pp")) and device_count_violation(
        fixed["dp"], fixed["tp"], fixed["pp"], fixed.get("cp", 1), world)
    if why:
        raise LayoutError(why)
    scored: list[_Outer] = []
    cal = cluster.calibration
    chain_graph = is_chain(build_layer_graph(profile))
    floor = 1.0 / max(1.0, cluster.device.compute_slowdown)     # shared cores: pipelines relieve contention
    for lay in outer_layouts(profile, cluster, train, opts):
        costs = layer_costs(profile, cluster, lay, train)
        lb = lower_bound_s(costs, lay, floor) + cal.step_overhead_s
        scored.append(_Outer(lb, lay, costs, memory_lower_bound_bytes(costs, lay) + cal.memory_overhead_bytes))
        if per_layer_applies(profile, lay, costs, opts, chain_graph):
            scored.append(_Outer(lb, lay, costs, per_layer=True))
    if not scored:
        raise LayoutError(_why_empty(profile, cluster, train, opts))
    scored.sort(key=lambda o: (o.lb_s, o.per_layer))
    best: list[Candidate] = []
    pruned = ilps = 0
    bound = math.inf
    statuses = set()
    mem_cap = cluster.device.memory_bytes
    fits_without_recompute: set[tuple] = set()   # outer layouts whose recompute=none placement fits
    names = profile.layer_names()
    usable = mem_cap - cal.memory_overhead_bytes
    tied = chain_graph and opts.formulation in ("auto", "tied")
    for i, outer in enumerate(scored):
        lay, costs = outer.layout, outer.costs
        if progress:
            progress(i + 1, len(scored))
        # per-block recompute only pays where no recomputation does not fit: recomputing never
        # shortens a step, it only buys memory (skipping elsewhere is a documented approximation)
        if outer.per_layer and _outer_key(lay) in fits_without_recompute:
            pruned += 1
            continue
        # prune against the best found: runner-ups are the best of what was solved, and the
        # family comparison (explain.py) solves each family on its own
        threshold = best[0].predicted.step_time_s if best else math.inf
        if outer.lb_s > threshold * (1 + 1e-9) or (outer.mem_lb_bytes or 0) > mem_cap:
            pruned += 1
            continue
        incumbent = chain = modes = None
        if outer.per_layer:
            modes = outer.modes = per_layer_mode_costs(profile, cluster, lay, train, costs, opts)
        if outer.per_layer or (tied and lay.pp * lay.vp > 1 and TiedChainILP.tied_blocks(names, costs)):
            # the tied chain's per-rank relaxation (tied.py): a much tighter bound than perfect
            # balance (inf when nothing fits), and, for per-layer recompute, block-count caps
            # below the best found so far (uniform modes are solved in full: they give the
            # runner-ups)
            chain = tied_chain(names, costs, lay, usable, modes)
            if chain.lower_bound(floor) + cal.step_overhead_s > threshold * (1 + 1e-9):
                pruned += 1
                continue
            if best and outer.per_layer:
                # in the ILP's units (pipeline term without the shared-device relief): a step
                # time below the threshold has an objective below this
                incumbent = (threshold * (1 + 1e-9) - cal.step_overhead_s) / floor
                if chain.count_caps(incumbent) is None:
                    pruned += 1
                    continue
        limit = opts.mixed_recompute_time_limit_s if modes is not None else opts.ilp_time_limit_s
        placed, status, ilp_bound = place(profile, cluster, lay, train, costs, time_limit_s=limit,
                                          formulation=opts.formulation, mode_costs=modes, gap_rel=opts.gap_rel,
                                          solver=opts.solver, incumbent_s=incumbent, chain=chain)
        ilps += lay.pp * lay.vp > 1 or modes is not None
        if placed is None:
            if status == "timeout":       # unsolved: its LP bound limits what we can claim
                statuses.add("feasible")
                bound = min(bound, ilp_bound)
            continue
        pred = evaluate(profile, cluster, placed, train, costs)
        if not pred.fits:
            continue
        if modes is None and lay.recompute == "none":
            fits_without_recompute.add(_outer_key(lay))
        statuses.add(status)
        if status == "feasible":
            bound = min(bound, ilp_bound)
        cand = Candidate(placed, pred, status, ilp_bound)
        same = [c for c in best if _degrees(c.layout) == _degrees(placed)]
        if same and _tiebreak(same[0]) <= _tiebreak(cand):
            continue      # keep runner-ups distinct in degrees and micro-batching
        best = [c for c in best if c not in same] + [cand]
        best.sort(key=_tiebreak)
        del best[max(1, opts.top_k):]        # the chosen layout is always kept
    wall = time.perf_counter() - t0
    if not best:
        lay, need = smallest_memory(profile, cluster, train, scored, opts)
        given = ", ".join(f"{k}={v}" for k, v in sorted(opts.fixed.items()) if isinstance(v, (int, float, str)))
        where = (f"no layout with {given} fits (the fields a preset or --layout fixed; without them another "
                 f"may)" if given else "the model fits nowhere")
        raise InfeasibleError(
            f"{where}: the smallest layout ({lay.short()}) needs "
            f"{_gib(need)} per device, but a device has {_gib(mem_cap)}",
            min_memory_bytes=need, binding_constraint="memory", smallest_layout=lay)
    obj = best[0].predicted.step_time_s
    bound = min(bound, obj)
    status = "optimal" if statuses <= {"optimal", "n/a"} else "feasible"
    info = SolverInfo(status=status, objective=obj, bound=bound, wall_s=wall,
                      gap=(obj - bound) / obj if obj > 0 else 0.0, layouts_considered=len(scored),
                      layouts_pruned=pruned, ilps_solved=ilps)
    return SearchResult(best=best, solver=info)


def smallest_memory(profile, cluster, train, scored: list[_Outer], opts, tries: int = 8) -> tuple[Layout, int]:
    """Solve the min-peak-memory ILP for the candidates with the smallest memory bound."""
    best: tuple[Layout, int] | None = None
    for o in scored:
        if o.per_layer and o.mem_lb_bytes is None:    # the memory bound of its least-memory mode
            o.modes = o.modes or per_layer_mode_costs(profile, cluster, o.layout, train, o.costs, opts)
            least = min(o.modes.values(), key=lambda c: sum(x.act_bytes for x in c.values()))
            o.mem_lb_bytes = memory_lower_bound_bytes(least, o.layout) + cluster.calibration.memory_overhead_bytes
    for o in sorted(scored, key=lambda o: o.mem_lb_bytes)[:tries]:
        lay, costs, mem_lb = o.layout, o.costs, o.mem_lb_bytes
        if best and mem_lb >= best[1]:
            break
        placed, _, _ = place(profile, cluster, lay, train, costs, objective="memory",
                             time_limit_s=opts.ilp_time_limit_s, mode_costs=o.modes, solver=opts.solver)
        if placed is None:
            continue
        need = evaluate(profile, cluster, placed, train, costs).peak_memory_bytes
        if best is None or need < best[1]:
            best = (placed, need)
    if best is None:    # every memory ILP stopped at its time limit before finding a placement
        raise InputError(f"the memory-minimising placement found nothing within --time-limit "
                         f"{opts.ilp_time_limit_s:g} s per ILP: give it more time")
    return best


def _why_empty(profile, cluster, train, opts) -> str:
    """Why no outer layout satisfies the user's constraints: the first rule that the layout they
    describe breaks (completed with ``estimate``'s defaults), else the search option that excludes it."""
    f = {k: v for k, v in opts.fixed.items() if k != "stages"}
    world, batch = cluster.world_size, train.global_batch
    sh = profile.shape or {}
    if "tp" in f:
        why = tp_violation(f["tp"], **tp_parts(sh))
        if why:
            return why
        if not any(k.tp_shardable for k in profile.kinds.values()) and f["tp"] > 1:
            return f"tp={f['tp']}: no layer of this model can be split by tensor parallelism"
    for k in ("tp", "pp", "dp"):
        if k in f and world % f[k]:
            return f"{k}={f[k]} does not divide the world size {world}"
    if f:
        try:
            lay = complete_layout(f, world, batch)
            lay.check_against(world, profile.layer_names(), batch, **tp_parts(sh))
        except AutoplanError as e:
            return str(e)
        why = framework_violation(framework_named(train.framework), lay, train.precision)
        if why:
            return why
        if lay.pp > 1 and lay.schedule not in opts.schedules:
            return f"schedule {lay.schedule} is not among the schedules searched ({', '.join(opts.schedules)})"
        if lay.zero not in opts.zero and lay.dp > 1:
            return f"zero={lay.zero} is not among the ZeRO stages searched ({opts.zero})"
        if lay.recompute not in opts.recompute:
            return f"recompute={lay.recompute} is not among the modes searched ({', '.join(opts.recompute)})"
    return (f"no layout satisfies the constraints {f or '{}'} for {world} devices and global batch {batch}: "
            f"dp*tp*pp must equal the world size, dp*mbs*num_microbatches the batch, and the pipeline schedule "
            f"must accept the micro-batch count")


def _gib(n: float) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.1f} MiB"
