"""What a pipeline step costs beyond its layers, from short real pipelines measured in groups.

``profile model --nproc N`` runs the model's own pipeline a few times inside the group job
(:mod:`autoplan.execute.pipeline_profile`: 2 stages, 1F1B and interleaved, few and many
micro-batches). :func:`fit_pipeline_costs` explains those step times with the layers' in-group
figures of the same job and three measured quantities (:class:`~autoplan.profile.formats.PipelineCosts`)::

    C_j      = sum_{l in j} (fwd_l + bwd_l) * f_c  +  a            chunk j per micro-batch
    tau_r    = sum_{chunks j of rank r} C_j
    step     = relief * pipeline_s(tau, C) + c                     (schedules.pipeline_s)
    relief   = 1 - e * (1 - max(1/s, min(1, u))),  u = sum_r m tau_r / (pp * pipeline_s)

``a`` (``per_chunk_s``): per chunk and micro-batch, its forward and backward actions in torch's
schedule with the messages they send and receive; ``e`` (``idle_share``): how much of its core a
waiting rank really leaves to the others (``e = 1`` is :func:`~autoplan.plan.schedules.shared_device_relief`'s
assumption, ``e = 0`` none); ``c`` (``per_step_s``): the schedule's per-step work; ``s``: the
layers' in-group time over their time alone (every process busy against one alone); ``f_c``: the
whole model's in-group time over the sum of its layers'
(:func:`~autoplan.plan.coefficient_sources.composition_factors`).
The fit minimises the squared relative errors over the runs (a grid over ``e``, least squares in
``a`` and ``c`` for each, both non-negative).

The cost model (:func:`autoplan.plan.cost.evaluate`) then costs a pipeline on an N-process cluster
with the same terms (its messages beyond the measured micro-batch size through the cluster's
send/recv fit, :func:`extra_message_s`): no constant fitted to benchmark layouts.
"""

from __future__ import annotations

import math

from autoplan.plan.plan import Layout
from autoplan.plan.schedules import pipeline_s
from autoplan.profile.formats import ModelProfile, PipelineCosts, PipelineTiming

IDLE_SHARE_GRID = 20
"""the fit tries idle_share = k / IDLE_SHARE_GRID, k = 0..IDLE_SHARE_GRID"""


def base_relief(slowdown: float, busy_s: list[float], pipeline: float) -> float:
    """The shared-device relief of :func:`autoplan.plan.schedules.shared_device_relief` for a device
    ``slowdown`` s: ``max(1/s, min(1, u))``, u the ranks' busy share of the pipeline."""
    if slowdown <= 1.0 or len(busy_s) < 2 or pipeline <= 0:
        return 1.0
    return max(1.0 / slowdown, min(1.0, sum(busy_s) / (len(busy_s) * pipeline)))


def measured_relief(relief: float, costs: PipelineCosts | None) -> float:
    """``relief`` (the full shared-device relief) as far as the measured pipelines showed it."""
    if costs is None:
        return relief
    return 1.0 - costs.idle_share * (1.0 - relief)


def _unit_times(profile: ModelProfile, world: int, mbs: int) -> list[float] | None:
    """Each unit's in-group forward+backward at ``mbs`` (times the composition factor), in model
    order; None where a kind lacks figures for ``world``."""
    from autoplan.plan.coefficient_sources import composition_factors
    f_c, _ = composition_factors(profile, world, mbs)
    out = []
    for info in profile.layers:
        g = profile.kinds[info.kind].group_timing(mbs, world=world)
        if g is None:
            return None
        out.append((g.forward_s + g.backward_s) * f_c)
    return out


def _slowdown(profile: ModelProfile, world: int, mbs: int, unit_s: list[float]) -> float:
    """The layers' in-group time (every process busy) over their time alone (>= 1)."""
    alone = sum(profile.kinds[i.kind].timing(mbs).forward_s + profile.kinds[i.kind].timing(mbs).backward_s
                for i in profile.layers)
    return max(1.0, sum(unit_s) / alone) if alone > 0 else 1.0


def modelled_pipeline(run: PipelineTiming, unit_s: list[float], per_chunk_s: float) -> tuple[float, list[float]]:
    """(pipeline_s, each rank's busy seconds) of ``run`` with the units' times and ``per_chunk_s``
    added to every chunk."""
    bounds = [sum(run.chunks[:j]) for j in range(len(run.chunks) + 1)]
    chunk_s = [sum(unit_s[a:b]) + per_chunk_s for a, b in zip(bounds, bounds[1:])]
    tau = [sum(chunk_s[r::run.pp]) for r in range(run.pp)]
    layout = Layout(pp=run.pp, vp=run.vp, num_microbatches=run.num_microbatches, schedule=run.schedule)
    return pipeline_s(tau, chunk_s, layout), [run.num_microbatches * t for t in tau]


def predicted_step_s(run: PipelineTiming, unit_s: list[float], costs: PipelineCosts) -> float:
    """What the measured terms say ``run`` takes (module docstring)."""
    pipe, busy = modelled_pipeline(run, unit_s, costs.per_chunk_s)
    return measured_relief(base_relief(costs.slowdown, busy, pipe), costs) * pipe + costs.per_step_s


def fit_pipeline_costs(profile: ModelProfile, world: int) -> PipelineCosts | None:
    """The :class:`PipelineCosts` of ``world`` from the profile's pipeline runs of that world and its
    in-group layer figures (module docstring); None without runs or figures."""
    runs = [t for t in profile.pipeline_timings if t.world == world and len(profile.layers) == sum(t.chunks)]
    if not runs:
        return None
    mbs = runs[0].mbs
    runs = [t for t in runs if t.mbs == mbs]
    unit_s = _unit_times(profile, world, mbs)
    if unit_s is None:
        return None
    s = _slowdown(profile, world, mbs, unit_s)
    a_max = max(t.step_s / (t.num_microbatches * t.vp) for t in runs)
    best: tuple[float, PipelineCosts] | None = None
    for k in range(IDLE_SHARE_GRID + 1):
        e = k / IDLE_SHARE_GRID

        def costs(a: float) -> PipelineCosts:
            base = PipelineCosts(world=world, mbs=mbs, per_chunk_s=a, idle_share=e, slowdown=s)
            # the per-step term: weighted least squares given a, non-negative
            w = [1.0 / t.step_s for t in runs]
            r = [(t.step_s - predicted_step_s(t, unit_s, base)) * wi for t, wi in zip(runs, w)]
            c = max(0.0, sum(ri * wi for ri, wi in zip(r, w)) / sum(wi * wi for wi in w))
            return PipelineCosts(world=world, mbs=mbs, per_chunk_s=a, idle_share=e, per_step_s=c, slowdown=s)

        def loss(a: float) -> float:
            c = costs(a)
            return sum(((predicted_step_s(t, unit_s, c) - t.step_s) / t.step_s) ** 2 for t in runs)
        a = _golden_min(loss, 0.0, a_max)
        cand = costs(a)
        err = loss(a)
        if best is None or err < best[0] - 1e-12:
            best = (err, cand)
    c = best[1]
    worst = max(abs(predicted_step_s(t, unit_s, c) - t.step_s) / t.step_s for t in runs)
    return PipelineCosts(world=world, mbs=mbs, per_chunk_s=c.per_chunk_s, idle_share=c.idle_share,
                         per_step_s=c.per_step_s, slowdown=round(s, 4), fit_error=round(worst, 4))


def _golden_min(f, lo: float, hi: float, iters: int = 60) -> float:
    """The minimiser of a unimodal ``f`` on [lo, hi] (golden-section search), the ends included."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    x = (a + b) / 2
    return min((lo, x, hi), key=f)


def extra_message_s(send_s, out_bytes: float, measured_bytes: float) -> float:
    """A cut's send and receive per micro-batch beyond what ``per_chunk_s`` measured: the cluster's
    send/recv time ``send_s(bytes)`` of the message minus that of the measured one (>= 0), both ways."""
    return 2 * max(0.0, send_s(out_bytes) - send_s(measured_bytes))
