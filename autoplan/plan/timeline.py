"""The timeline of one training step: what every pipeline rank does, and when.

``autoplan show`` draws it. Two pure parts, tested apart from any drawing:

1. :func:`chunk_times` turns the cost model's per-layer figures (:class:`~autoplan.plan.coefficients.LayerCost`,
   the same numbers :func:`~autoplan.plan.cost.evaluate` adds up) into what one pipeline chunk costs
   per micro-batch, split into forward, point-to-point send, recompute and backward.
2. :func:`simulate_pipeline` runs the schedule's own order of operations (torch's ``ScheduleGPipe``,
   ``Schedule1F1B``, ``ScheduleInterleaved1F1B``: :func:`autoplan.plan.schedules.schedule_order`) on those costs: an operation starts when its rank is
   free and its input is ready (the previous chunk's forward of that micro-batch, or the next chunk's
   backward). Each rank's idle time becomes a ``bubble`` bar.

:func:`step_timeline` appends what follows the pipeline in the cost model (data-parallel
synchronisation, optimizer, calibrated overhead; :func:`after_pipeline_bars`) and checks the result
against the cost model's predicted step time.

How the simulated schedule relates to the cost model's pipeline term
(``(m - 1) * tau_max + sum_r tau_r``; interleaved ``m * tau_max + (pp - 1) * max_j chunk_j``): with
equally loaded ranks and chunks the two are the same number. With uneven ranks the order of operations matters and the simulation is the finer
figure: the cost model can be a little above it (1F1B lets a slow rank start its next forward
while the others drain), or below it (GPipe when the ranks slowest in forward and in backward
differ). :attr:`Timeline.schedule_difference_s` is simulated minus modelled. The drawn step
always ends at the predicted step time: where the model is above the simulation the difference is
a ``model_margin`` bar after the pipeline, so the picture shows where the prediction adds time
that the schedule itself does not need; where it is below, the pipeline ends later than the model
says and :func:`step_timeline` reports it (``Timeline.exceeds_prediction``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autoplan.errors import InputError
from autoplan.plan.memory import boundary_crossings
from autoplan.plan.schedules import op_dependency, schedule_order
from autoplan.plan.plan import Layout, Prediction

BAR_KINDS = ("forward", "recompute", "backward", "p2p", "bubble", "model_margin", "dp_sync", "optimizer", "wait",
             "overhead")
"""Everything a bar can be. ``bubble``: a rank waits inside the pipeline; ``model_margin``: time the cost
model adds after the pipeline that the simulated schedule does not need (see the module docstring);
``wait``: a rank waits for the slowest rank's data-parallel sync or optimizer step."""


@dataclass(frozen=True)
class ChunkTimes:
    """One pipeline chunk's cost per micro-batch, split the way the timeline draws it (seconds)."""

    forward_s: float
    """forward compute and the tensor-parallel collectives of forward"""
    send_s: float
    """sending the chunk's output to the next chunk (half the cost model's p2p of the boundary)"""
    recv_grad_s: float
    """the gradient of that output coming back (the other half), at the start of backward"""
    recompute_s: float
    """forward work repeated in backward (activation recomputation, with its collectives)"""
    backward_s: float
    """backward compute and the tensor-parallel collectives of backward"""

    @property
    def total_s(self) -> float:
        return self.forward_s + self.send_s + self.recv_grad_s + self.recompute_s + self.backward_s


@dataclass(frozen=True)
class Bar:
    rank: int
    """pipeline rank"""
    start_s: float
    duration_s: float
    kind: str
    """one of :data:`BAR_KINDS`"""
    microbatch: int = -1
    chunk: int = -1
    """global chunk (stage) index, ``-1`` outside the pipeline"""

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass
class Timeline:
    bars: list[Bar]
    pp: int
    pipeline_s: float
    """end of the last pipeline operation (simulated)"""
    model_pipeline_s: float
    """the cost model's pipeline term: compute + recompute + tp_comm + pp_p2p + bubble"""
    step_time_s: float
    """end of the last bar"""
    predicted_step_time_s: float
    breakdown_s: dict[str, float] = field(default_factory=dict)

    @property
    def schedule_difference_s(self) -> float:
        """Simulated pipeline minus the cost model's pipeline term."""
        return self.pipeline_s - self.model_pipeline_s

    @property
    def exceeds_prediction(self) -> bool:
        return self.step_time_s > self.predicted_step_time_s * (1 + 1e-9) + 1e-12

    def rank_bars(self, rank: int) -> list[Bar]:
        return sorted((b for b in self.bars if b.rank == rank), key=lambda b: b.start_s)

    def total_by_kind(self, rank: int) -> dict[str, float]:
        out = {k: 0.0 for k in BAR_KINDS}
        for b in self.bars:
            if b.rank == rank:
                out[b.kind] += b.duration_s
        return out


# --------------------------------------------------------------------------------------------
# 1. per-chunk costs from the cost model's per-layer figures
# --------------------------------------------------------------------------------------------

def forward_fraction(profile, layout: Layout) -> dict[str, float]:
    """Forward share of forward + backward compute for each layer kind, from the profile's timing
    at the layout's micro-batch size and TP degree (the cost model keeps only the sum)."""
    out = {}
    for name, kind in profile.kinds.items():
        t = kind.timing(layout.mbs, layout.tp if kind.tp_shardable else 1)
        total = t.forward_s + t.backward_s
        out[name] = t.forward_s / total if total > 0 else 0.5
    return out


def chunk_times(profile, layout: Layout, costs: dict) -> list[ChunkTimes]:
    """What each chunk (``layout.stages[j]``) costs per micro-batch, from per-layer ``costs``
    (:func:`autoplan.plan.coefficients.costs_for_layout`). The per-rank sums equal the cost model's ``tau_r``.

    The cost model keeps a layer's forward + backward as one number; it is split by the profile's
    forward share. Tensor-parallel collectives: two of a block's four run in forward, two in backward,
    and full recomputation runs the forward two again (in backward, drawn as recompute).
    The send/receive of a pipeline boundary is charged, as in the cost model, to the chunk before it:
    half after its forward (the activation), half before its backward (the gradient)."""
    kinds = {info.name: info.kind for info in profile.layers}
    fwd_frac = forward_fraction(profile, layout)
    out = []
    p2p_of = [0.0] * len(layout.stages)
    for b, edges in enumerate(boundary_crossings(profile.edges, layout.stages)):
        p2p_of[b] += sum(costs[u].p2p_s for u, _ in edges)
    for j, st in enumerate(layout.stages):
        fwd = bwd = reco = 0.0
        for n in st:
            c = costs[n]
            f = fwd_frac[kinds[n]]
            full = layout.recompute_of(n) == "full" and c.recompute_s > 0
            tp_fwd = c.tp_comm_s / (3 if full else 2)
            fwd += c.compute_s * f + tp_fwd + c.cp_comm_s / 3       # the K,V exchange: once forward, twice
            bwd += c.compute_s * (1 - f) + (c.tp_comm_s - (2 * tp_fwd if full else tp_fwd)) + 2 * c.cp_comm_s / 3
            reco += c.recompute_s + (tp_fwd if full else 0.0)
        out.append(ChunkTimes(forward_s=fwd, send_s=p2p_of[j] / 2, recv_grad_s=p2p_of[j] / 2,
                              recompute_s=reco, backward_s=bwd))
    return out


# --------------------------------------------------------------------------------------------
# 2. the simulation of the schedule's order of operations
# --------------------------------------------------------------------------------------------

def simulate_pipeline(chunks: list[ChunkTimes], *, pp: int, vp: int, m: int, schedule: str) -> list[Bar]:
    """Bars of every pipeline operation of every rank, and ``bubble`` bars where a rank waits.

    An operation starts when its rank has finished the previous one and its input is there: a
    forward needs the previous chunk's forward of the same micro-batch (including its send), a
    backward the next chunk's backward (the last chunk's backward needs its own forward).
    Pure: ``chunks[j]`` is chunk ``j``'s cost per micro-batch; chunk ``j`` runs on rank ``j % pp``."""
    n_chunks = len(chunks)
    if n_chunks != pp * vp:
        raise InputError(f"timeline: {n_chunks} chunks but pp*vp = {pp * vp}")
    orders = [schedule_order(schedule, pp=pp, vp=vp, m=m, rank=r) for r in range(pp)]
    done: dict[tuple[str, int, int], float] = {}     # op -> end time
    pos = [0] * pp
    free = [0.0] * pp
    bars: list[Bar] = []
    waiting: dict[tuple[str, int, int], list[int]] = {}
    ready = list(range(pp))

    while ready:
        r = ready.pop()
        while pos[r] < len(orders[r]):
            op = orders[r][pos[r]]
            dep = op_dependency(op, n_chunks)
            if dep is not None and dep not in done:
                waiting.setdefault(dep, []).append(r)
                break
            kind, j, i = op
            start = max(free[r], done[dep] if dep is not None else 0.0)
            if start > free[r]:
                bars.append(Bar(r, free[r], start - free[r], "bubble"))
            c = chunks[j]
            parts = ([("forward", c.forward_s), ("p2p", c.send_s)] if kind == "F" else
                     [("p2p", c.recv_grad_s), ("recompute", c.recompute_s), ("backward", c.backward_s)])
            t = start
            for what, d in parts:
                if d > 0:
                    bars.append(Bar(r, t, d, what, microbatch=i, chunk=j))
                    t += d
            free[r] = t
            done[op] = t
            pos[r] += 1
            ready.extend(waiting.pop(op, []))
    if any(pos[r] < len(orders[r]) for r in range(pp)):
        raise InputError(f"timeline: schedule {schedule} deadlocks with pp={pp} vp={vp} m={m}")
    end = max(free)
    for r in range(pp):
        if free[r] < end:
            bars.append(Bar(r, free[r], end - free[r], "bubble"))
    return bars


# --------------------------------------------------------------------------------------------
# 3. the whole step
# --------------------------------------------------------------------------------------------

def after_pipeline_bars(pp: int, pipeline_end_s: float, breakdown_s: dict[str, float],
                        dp_sync_per_rank_s: list[float], optimizer_per_rank_s: list[float]) -> list[Bar]:
    """What the cost model puts after the pipeline, on every rank: data-parallel synchronisation
    (each rank's own, then waiting for the slowest), the optimizer step (likewise), and the calibrated
    per-step overhead. The cost model counts these as exposed (not overlapped with backward); when
    it learns to overlap them, this is the function to change."""
    bars = []
    t0 = pipeline_end_s
    dp_s, opt_s = breakdown_s.get("dp_sync", 0.0), breakdown_s.get("optimizer", 0.0)
    overhead_s = breakdown_s.get("overhead", 0.0)
    for r in range(pp):
        t = t0
        for kind, own, slot in (("dp_sync", dp_sync_per_rank_s[r], dp_s), ("optimizer", optimizer_per_rank_s[r], opt_s)):
            own = min(own, slot)
            if own > 0:
                bars.append(Bar(r, t, own, kind))
            if slot - own > 0:
                bars.append(Bar(r, t + own, slot - own, "wait"))
            t += slot
        if overhead_s > 0:
            bars.append(Bar(r, t, overhead_s, "overhead"))
    return bars


def per_rank_sums(layout: Layout, costs: dict, *fields: str) -> list[list]:
    """For each named :class:`~autoplan.plan.coefficients.LayerCost` field, its sum over each pipeline rank's layers."""
    out = [[0] * layout.pp for _ in fields]
    for j, st in enumerate(layout.stages):
        for n in st:
            for sums, f in zip(out, fields):
                sums[j % layout.pp] += getattr(costs[n], f)
    return out


def model_pipeline_s(breakdown_s: dict[str, float]) -> float:
    """The cost model's pipeline term from a prediction's breakdown (what the simulation replaces)."""
    return sum(breakdown_s.get(k, 0.0) for k in ("compute", "recompute", "tp_comm", "cp_comm", "pp_p2p", "bubble"))


def pipeline_scale(chunks: list[ChunkTimes], layout: Layout, breakdown_s: dict[str, float]) -> float:
    """The factor :func:`~autoplan.plan.cost.evaluate` applies to the per-layer pipeline costs
    before it reports them (its shared-device relief on CPU clusters whose processes share cores;
    1 elsewhere): the bottleneck rank's reported work over ``m`` times its per-layer sum."""
    p, m = layout.pp, layout.num_microbatches
    tau = [sum(c.total_s for c in chunks[r::p]) for r in range(p)]
    raw = m * max(tau)
    work = sum(breakdown_s.get(k, 0.0) for k in ("compute", "recompute", "tp_comm", "cp_comm", "pp_p2p"))
    return work / raw if raw > 0 else 1.0


def step_timeline(profile, layout: Layout, costs: dict, predicted: Prediction) -> Timeline:
    """The whole step of ``layout``: the simulated pipeline, then the cost model's after-pipeline terms.

    ``costs`` are per-layer figures with each layer's recompute mode
    (:func:`autoplan.plan.coefficients.costs_for_layout`), ``predicted`` what :func:`~autoplan.plan.cost.evaluate`
    made of them."""
    p = layout.pp
    chunks = chunk_times(profile, layout, costs)
    f = pipeline_scale(chunks, layout, predicted.breakdown_s)
    if abs(f - 1.0) > 1e-12:
        chunks = [ChunkTimes(*(x * f for x in (c.forward_s, c.send_s, c.recv_grad_s, c.recompute_s, c.backward_s)))
                  for c in chunks]
    bars = simulate_pipeline(chunks, pp=p, vp=layout.vp, m=layout.num_microbatches, schedule=layout.schedule)
    pipe_end = max((b.end_s for b in bars), default=0.0)
    model_pipe = model_pipeline_s(predicted.breakdown_s)
    margin = model_pipe - pipe_end
    if margin > 1e-12 * max(1.0, model_pipe):
        bars += [Bar(r, pipe_end, margin, "model_margin") for r in range(p)]
        after_start = model_pipe
    else:
        after_start = pipe_end
    dps, opt = per_rank_sums(layout, costs, "dp_sync_s", "optimizer_s")
    bars += after_pipeline_bars(p, after_start, predicted.breakdown_s, dps, opt)
    end = max(b.end_s for b in bars)
    return Timeline(bars=bars, pp=p, pipeline_s=pipe_end, model_pipeline_s=model_pipe, step_time_s=end,
                    predicted_step_time_s=predicted.step_time_s, breakdown_s=dict(predicted.breakdown_s))


def check_tiles(timeline: Timeline, rel_tol: float = 1e-9) -> None:
    """Every rank's bars cover [0, step_time_s] without gap or overlap (ValueError otherwise): what
    makes "the bars add up to the step time" a property of the drawn data."""
    for r in range(timeline.pp):
        t = 0.0
        for b in timeline.rank_bars(r):
            if not math.isclose(b.start_s, t, rel_tol=rel_tol, abs_tol=1e-12 * max(1.0, timeline.step_time_s)):
                raise ValueError(f"rank {r}: bar {b.kind} starts at {b.start_s} but the previous ended at {t}")
            t = b.end_s
        if not math.isclose(t, timeline.step_time_s, rel_tol=rel_tol):
            raise ValueError(f"rank {r}: bars end at {t}, the step at {timeline.step_time_s}")

