"""What a pipeline step costs beyond its layers, from short real pipelines measured in groups.

``profile model --nproc N`` runs the model's own pipeline a few times inside the group job
(:mod:`autoplan.execute.pipeline_profile`: 2 stages, and N where N is even; 1F1B and interleaved, few
and many micro-batches). :func:`fit_pipeline_costs` explains those step times, one pipeline depth at a
time (a layout is costed with the depth nearest its own, :func:`pipeline_costs_for`), with the layers' in-group
figures of the same job and a few measured quantities (:class:`~autoplan.profile.formats.PipelineCosts`)::

    C_j      = sum_{l in j} (fwd_l + bwd_l) * f_c  +  a            chunk j per micro-batch
    tau_r    = sum_{chunks j of rank r} C_j
    step     = relief * pipeline_s(tau, C) + c                     (schedules.pipeline_s)
    relief   = shared_cores_pipeline_s(C split into forward and backward; s, e) / pipeline_s(tau, C)

``a`` (``per_chunk_s`` under 1F1B, ``per_chunk_interleaved_s`` under interleaved 1F1B, which
torch runs through another code path): per chunk and micro-batch, its forward and backward actions in torch's
schedule with the messages they send and receive; ``e`` (``idle_share``): how much of its core a
waiting rank really leaves to the others (``e = 1`` all of it, ``e = 0`` none), the schedule's order
run moment by moment with the k busy ranks sharing the cores
(:func:`~autoplan.plan.schedules.shared_cores_pipeline_s`; before 2026-12-06 the relief spread that
capacity over the step as an average, ``1 - e * (1 - max(1/s, min(1, u)))`` with u the ranks' mean busy
share, which prices a pipeline whose ranks wait in the fill and drain as if the others used the
cores they leave at every moment: on the 55 stored fidelity workloads the idea came from, the model's
choice within 5% of the fastest pooled went from 41 to 46; on two seeds drawn after it the error fell
from 10.9% to 9.3% and the choice did not improve, 8 of 12 within 5% against 9, ``docs/fidelity.md``); ``c``
(``per_step_s``): the schedule's per-step work; ``s``: how much faster one rank computes while the
others wait than with every process busy (the runs' references, :mod:`autoplan.execute.pipeline_profile`;
else the layers' in-group time over their time alone); ``f_c``: the whole model's in-group time over
the sum of its layers' (:func:`~autoplan.plan.coefficient_sources.composition_factors`). The fit
minimises the squared relative errors over the runs (:func:`fit_pipeline_costs`).

The cost model (:func:`autoplan.plan.cost.evaluate`) then costs a pipeline on an N-process cluster
with the same terms (its messages beyond the measured micro-batch size through the cluster's
send/recv fit, :func:`extra_message_s`): no constant fitted to benchmark layouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from autoplan.plan.plan import Layout
from autoplan.plan.schedules import pipeline_s, pipeline_schedule, shared_cores_pipeline_s
from autoplan.profile.formats import RELIEF_MODELS, ModelProfile, PipelineCosts, PipelineTiming, nearest_depth

IDLE_SHARE_GRID = 20
"""the fit tries idle_share = k / IDLE_SHARE_GRID, k = 0..IDLE_SHARE_GRID (where the runs can tell)"""
FIT_ERROR_LIMIT = 0.25
"""a fit that misses one of its runs by more than this (relative) is kept in the profile but not
used: the runs contradict each other (a machine whose load changed between them)"""
RELIEF_ITERATIONS = 6
"""rounds of (relief from the terms, terms from the relief) per idle_share"""
RELIEF_MODEL = RELIEF_MODELS[0]
"""how this fit has waiting ranks lend their cores (:attr:`~autoplan.profile.formats.PipelineCosts.relief_model`)"""


def usable(costs: PipelineCosts | None) -> PipelineCosts | None:
    """``costs`` where its fit explains its runs (:data:`FIT_ERROR_LIMIT`), else None."""
    return costs if costs is not None and costs.fit_error <= FIT_ERROR_LIMIT else None


def pipeline_costs_for(profile: ModelProfile, world: int, pp: int) -> PipelineCosts | None:
    """The usable costs (:func:`usable`) measured on ``world`` processes at the depth nearest ``pp``
    (:func:`~autoplan.profile.formats.nearest_depth`): a depth whose runs contradict each other gives
    way to another depth's. Costs an older fit derived (``relief_model`` ``step_average``) are fitted
    again from the profile's own runs first (:func:`refit_older_costs`)."""
    refit_older_costs(profile)
    return nearest_depth([c for c in profile.pipeline_costs if c.world == world and usable(c)], pp)


def refit_older_costs(profile: ModelProfile) -> None:
    """Replace, in ``profile``, pipeline costs that a fit with another relief model derived by this
    fit of the same runs (the runs are what was measured; the costs are derived from them)."""
    if all(c.relief_model == RELIEF_MODEL for c in profile.pipeline_costs):
        return
    fresh = [c if c.relief_model == RELIEF_MODEL else fit_pipeline_costs(profile, c.world, c.pp)
             for c in profile.pipeline_costs]
    profile.pipeline_costs = [c for c in fresh if c is not None]


def pipeline_relief(costs: PipelineCosts, forward_s: list[float], backward_s: list[float], layout: Layout,
                    pipeline: float) -> float:
    """The factor on a pipeline's terms where its ranks share cores, as the measured runs showed it:
    the schedule run moment by moment with the runs' slowdown and ``idle_share``
    (:func:`~autoplan.plan.schedules.shared_cores_pipeline_s`) over ``pipeline`` (the same chunks'
    pipeline with every process busy all along, :func:`~autoplan.plan.schedules.pipeline_s`), kept
    within [1/s, 1] (the fit and the cost model both use this). ``forward_s``, ``backward_s``: each
    chunk's share of its per-micro-batch time (:func:`split_chunks`)."""
    s = costs.slowdown
    if s <= 1.0 or layout.pp < 2 or pipeline <= 0:
        return 1.0
    shared = shared_cores_pipeline_s(forward_s, backward_s, pp=layout.pp, vp=layout.vp,
                                     m=layout.num_microbatches, schedule=pipeline_schedule(layout),
                                     slowdown=s, idle_share=costs.idle_share)
    return min(1.0, max(1.0 / s, shared / pipeline))


def split_chunks(chunk_s: list[float], chunk_forward_s: list[float], per_chunk: float) -> tuple[list[float], list[float]]:
    """(forward, backward) of every chunk per micro-batch: ``chunk_forward_s`` its layers' forward, and
    half of the measured ``per_chunk`` (a forward and a backward action, a message each way); the rest
    of ``chunk_s`` (which holds ``per_chunk``) is backward."""
    fwd = [f + per_chunk / 2 for f in chunk_forward_s]
    return fwd, [c - f for c, f in zip(chunk_s, fwd)]


def forward_shares(profile: ModelProfile, mbs: int, world: int) -> dict[str, float]:
    """Each layer kind's forward share of its forward + backward at ``mbs``, in groups of ``world`` where
    measured so (else alone)."""
    out = {}
    for name, k in profile.kinds.items():
        t = k.group_timing(mbs, world=world) or k.timing(mbs)
        total = t.forward_s + t.backward_s
        out[name] = t.forward_s / total if total > 0 else 0.5
    return out


@dataclass(frozen=True)
class UnitTimes:
    """Each unit's (layer's) in-group forward + backward at one micro-batch size, times the composition
    factor, in model order, and the forward part of it."""

    total_s: list[float]
    forward_s: list[float]


def _unit_times(profile: ModelProfile, world: int, mbs: int) -> UnitTimes | None:
    """:class:`UnitTimes` of ``profile`` in groups of ``world`` at ``mbs``; None where a kind lacks
    figures for ``world``."""
    from autoplan.plan.coefficient_sources import composition_factors
    f_c, _ = composition_factors(profile, world, mbs)
    share = forward_shares(profile, mbs, world)
    total, forward = [], []
    for info in profile.layers:
        g = profile.kinds[info.kind].group_timing(mbs, world=world)
        if g is None:
            return None
        total.append((g.forward_s + g.backward_s) * f_c)
        forward.append(total[-1] * share[info.kind])
    return UnitTimes(total, forward)


def _slowdown(profile: ModelProfile, world: int, mbs: int, units: UnitTimes) -> float:
    """The layers' in-group time (every process busy) over their time alone (>= 1)."""
    alone = sum(profile.kinds[i.kind].timing(mbs).forward_s + profile.kinds[i.kind].timing(mbs).backward_s
                for i in profile.layers)
    return max(1.0, sum(units.total_s) / alone) if alone > 0 else 1.0


def _run_layout(run: PipelineTiming) -> Layout:
    return Layout(pp=run.pp, vp=run.vp, num_microbatches=run.num_microbatches, schedule=run.schedule)


def modelled_pipeline(run: PipelineTiming, units: UnitTimes, per_chunk_s: float) -> tuple[float, list[float], list[float]]:
    """(pipeline_s, each chunk's forward, each chunk's backward) of ``run`` with the units' times and
    ``per_chunk_s`` added to every chunk, every process busy all along."""
    bounds = [sum(run.chunks[:j]) for j in range(len(run.chunks) + 1)]
    chunk_s = [sum(units.total_s[a:b]) + per_chunk_s for a, b in zip(bounds, bounds[1:])]
    fwd, bwd = split_chunks(chunk_s, [sum(units.forward_s[a:b]) for a, b in zip(bounds, bounds[1:])], per_chunk_s)
    tau = [sum(chunk_s[r::run.pp]) for r in range(run.pp)]
    return pipeline_s(tau, chunk_s, _run_layout(run)), fwd, bwd


def _chunk_s(costs: PipelineCosts, interleaved: bool) -> float:
    return costs.per_chunk_interleaved_s if interleaved else costs.per_chunk_s


def per_chunk_s(costs: PipelineCosts, layout: Layout) -> float:
    """The measured cost per chunk and micro-batch of ``layout``'s schedule."""
    return _chunk_s(costs, layout.vp > 1)


def _relief(run: PipelineTiming, units: UnitTimes, costs: PipelineCosts) -> float:
    pipe, fwd, bwd = modelled_pipeline(run, units, _chunk_s(costs, run.vp > 1))
    return pipeline_relief(costs, fwd, bwd, _run_layout(run), pipe)


def predicted_step_s(run: PipelineTiming, units: UnitTimes, costs: PipelineCosts) -> float:
    """What the measured terms say ``run`` takes (module docstring)."""
    pipe, _, _ = modelled_pipeline(run, units, _chunk_s(costs, run.vp > 1))
    return _relief(run, units, costs) * pipe + costs.per_step_s


def fit_pipeline_costs(profile: ModelProfile, world: int, pp: int = 0) -> PipelineCosts | None:
    """The :class:`PipelineCosts` of ``world`` from the profile's pipeline runs of that world (of depth
    ``pp``; 0: every depth) and its in-group layer figures (module docstring; the runs' step times as
    measured, see below); None without runs or figures.

    For each ``e`` of a grid, the step is linear in the unknowns once the relief is known::

        step_i = relief_i * (P_i + k_i * a_i) + c,   P_i = pipeline_s(tau, C) with a = 0,
        k_i = m + pp - 1 (1F1B) or m vp + pp - 1 (interleaved): what a added to every chunk adds

    so (a 1F1B, a interleaved, c) is non-negative least squares in relative error, the relief
    recomputed from the fitted terms a few times; the ``e`` with the smallest error wins. Only where
    the runs outnumber the unknowns: with fewer (a 4-stage pipeline of a model too small to interleave
    runs 1F1B twice) any ``e`` fits them exactly, and ``e`` stays 1, the relief's own assumption (on
    fidelity seed 20261213's workload 1, e = 0.7 from two such runs priced its 4-stage pipelines level
    with its data-parallel layouts, 0.223 against 0.221 s, where the data-parallel one measured 8% slower).

    The step times are taken as measured. Until 2026-12-04 they were first put on the in-group figures'
    scale (times the whole model's in-group time over the median of the references timed beside the
    runs): the whole model is now measured first in the job, in the state a training job starts in,
    and the references beside the pipelines, measured last, scatter with the state the job's TP, FSDP
    and cp cases leave the machine in (on fidelity seed 20261221's workload 5, 3 processes: 33-54 ms
    within one profile, the whole model 37 ms), so the factor moved every pipeline by up to 27%. Refitted
    without it, on the layouts `validate` measured (``docs/fidelity.md``): 25 workloads of seeds
    20261216-20, error 10.2% -> 8.8% (pipelines -8.6% -> -7.5%); seed 20261221, 10.0% -> 8.1%; six
    workloads profiled again with balanced chunks, 11.2% -> 10.3%; the two shapes of issue 24, 3.6% ->
    4.3%."""
    runs = [t for t in profile.pipeline_timings if t.world == world and len(profile.layers) == sum(t.chunks)]
    if not runs:
        return None
    mbs = runs[0].mbs
    runs = [t for t in runs if t.mbs == mbs and pp in (0, t.pp)]
    if not runs:
        return None
    units = _unit_times(profile, world, mbs)
    if units is None:
        return None
    lone = [t.reference_s / t.lone_reference_s for t in runs if t.lone_reference_s > 0 and t.reference_s > 0]
    s = max(1.0, sorted(lone)[len(lone) // 2]) if lone else _slowdown(profile, world, mbs, units)
    base = [modelled_pipeline(t, units, 0.0)[0] for t in runs]
    slope = [t.num_microbatches * t.vp + t.pp - 1 for t in runs]
    interleaved = [t.vp > 1 for t in runs]
    unknowns = (3 if any(interleaved) else 2) + 1          # the linear terms and e
    grid = [k / IDLE_SHARE_GRID for k in range(IDLE_SHARE_GRID + 1)] if len(runs) > unknowns else [1.0]
    best: tuple[float, PipelineCosts] | None = None
    for e in grid:
        costs = PipelineCosts(world=world, mbs=mbs, per_chunk_s=0.0, idle_share=e, slowdown=s, pp=pp)
        for _ in range(RELIEF_ITERATIONS):
            relief = [_relief(t, units, costs) for t in runs]
            rows = [[rl * kk / t.step_s if not v else 0.0, rl * kk / t.step_s if v else 0.0, 1.0 / t.step_s]
                    for t, rl, kk, v in zip(runs, relief, slope, interleaved)]
            ys = [1.0 - rl * b / t.step_s for t, rl, b in zip(runs, relief, base)]
            a1, av, c = _nonnegative_least_squares(rows, ys)
            if not any(interleaved):
                av = a1
            costs = replace(costs, per_chunk_s=a1, per_chunk_interleaved_s=av, per_step_s=c)
        err = sum(((predicted_step_s(t, units, costs) - t.step_s) / t.step_s) ** 2 for t in runs)
        if best is None or err < best[0] - 1e-12:
            best = (err, costs)
    costs = best[1]
    worst = max(abs(predicted_step_s(t, units, costs) - t.step_s) / t.step_s for t in runs)
    return replace(costs, slowdown=round(s, 4), fit_error=round(worst, 4))


def _nonnegative_least_squares(rows: list[list[float]], ys: list[float]) -> list[float]:
    """argmin ||A x - y|| over x >= 0, by trying every set of free unknowns (a handful of them)."""
    import itertools

    import numpy as np
    a, y = np.asarray(rows, dtype=float), np.asarray(ys, dtype=float)
    n = a.shape[1]
    best, best_x = math.inf, [0.0] * n
    for size in range(n + 1):
        for free in itertools.combinations(range(n), size):
            x = np.zeros(n)
            if free:
                x[list(free)] = np.linalg.lstsq(a[:, list(free)], y, rcond=None)[0]
            if (x < 0).any():
                continue
            r = float(((a @ x - y) ** 2).sum())
            if r < best - 1e-15:
                best, best_x = r, [float(v) for v in x]
    return best_x


def extra_message_s(send_s, out_bytes: float, measured_bytes: float) -> float:
    """A cut's send and receive per micro-batch beyond what ``per_chunk_s`` measured: the cluster's
    send/recv time ``send_s(bytes)`` of the message minus that of the measured one (>= 0), both ways."""
    return 2 * max(0.0, send_s(out_bytes) - send_s(measured_bytes))
