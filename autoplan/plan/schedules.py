"""What a pipeline schedule is, in one place: the rules torch's schedules impose on a layout, the
order in which they run chunk forwards and backwards, the micro-batches each rank holds at its
memory peaks, and the time of the pipeline part of a step (steady state plus fill and drain).

Every user reads it from here: plan validation (:meth:`autoplan.plan.plan.Layout.check_against`,
the search), the cost model and the ILP (in-flight micro-batches, :func:`pipeline_s`), the timeline
of ``autoplan show`` (:func:`schedule_order`) and the executor (``execute/apply.py`` checks a layout
with :func:`check_schedule` before any collective; ``execute/pp.py`` builds torch's schedule)."""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

from autoplan.errors import InputError, LayoutError
from autoplan.profile.formats import ClusterProfile

SCHEDULES = ("gpipe", "1f1b", "interleaved")
"""torch's ``ScheduleGPipe``, ``Schedule1F1B`` and ``ScheduleInterleaved1F1B``"""


class PipelineShape(Protocol):
    """What a schedule needs of a layout (:class:`autoplan.plan.plan.Layout` is one)."""

    pp: int
    vp: int
    num_microbatches: int
    schedule: str


def chunks_rule_violation(schedule: str, *, vp: int) -> str | None:
    """Only the interleaved schedule runs more than one chunk per rank."""
    if vp > 1 and schedule != "interleaved":
        return f"vp={vp} needs schedule=interleaved (got {schedule})"
    return None


def schedule_rule_violation(schedule: str, *, pp: int, vp: int, num_microbatches: int) -> str | None:
    """The pipeline-schedule rule a layout breaks, in words, or None.

    These are the rules of torch.distributed.pipelining (torch 2.13, ``schedules.py``) that the
    executor runs, plus one of the planner's own; ``search`` emits only layouts that pass them, and
    ``estimate`` / ``solve --layout`` refuse the others naming the rule:

    - ``Schedule1F1B``: ``n_microbatches >= num_stages`` (pp);
    - ``ScheduleInterleaved1F1B``: with ``rounds = max(1, n_microbatches // pp)``,
      ``n_microbatches % rounds == 0`` (torch relaxes Megatron's ``n_microbatches % pp == 0``);
      any number of local stages ``vp`` (layers per chunk need not be equal);
    - ``ScheduleGPipe``: any number of micro-batches;
    - planner: interleaving needs ``num_microbatches >= pp`` (with fewer micro-batches than ranks the
      pipeline never fills, so virtual stages cannot shorten the bubble and the cost model's
      interleaved bubble, (pp - 1) chunk times, would not hold), and ``vp > 1`` needs ``pp > 1``."""
    m = num_microbatches
    if vp > 1 and pp == 1:
        return f"vp={vp} needs pp > 1 (virtual stages interleave the chunks of several pipeline ranks)"
    why = chunks_rule_violation(schedule, vp=vp)
    if why or pp == 1:
        return why
    if schedule == "1f1b" and m < pp:
        return f"schedule 1f1b needs num_microbatches >= pp={pp}, got {m} (torch Schedule1F1B)"
    if schedule == "interleaved":
        if m < pp:
            return (f"interleaved 1F1B needs num_microbatches >= pp={pp}, got {m} (with fewer micro-batches "
                    f"than pipeline ranks interleaving cannot shorten the bubble)")
        rounds = max(1, m // pp)
        if m % rounds:
            return (f"interleaved 1F1B needs num_microbatches a multiple of max(1, num_microbatches // pp) = "
                    f"{rounds} (pp={pp}), got {m} (torch ScheduleInterleaved1F1B)")
    return None


def check_schedule(schedule: str, *, pp: int, vp: int, num_microbatches: int) -> None:
    """Raise :class:`LayoutError` naming the rule of :func:`schedule_rule_violation` a layout breaks."""
    why = schedule_rule_violation(schedule, pp=pp, vp=vp, num_microbatches=num_microbatches)
    if why:
        raise LayoutError(why)


def pipeline_schedule(layout: PipelineShape) -> str:
    """The schedule whose order a layout runs: without pipelining (pp = 1) micro-batches go one at a
    time, forward then backward (gradient accumulation), which is 1F1B's order on one stage."""
    return layout.schedule if layout.pp > 1 else "1f1b"


def warmup_forwards(schedule: str, *, pp: int, vp: int, m: int, rank: int) -> int:
    """Forwards pipeline rank ``rank`` runs before its first backward::

        GPipe        m * vp                                   every forward first
        1F1B         min(m, pp - rank)                        Narayanan et al. 2021; torch's Schedule1F1B
        interleaved  min((vp - 1) * per_round + 2 * (pp - 1 - rank), m * vp),
                     per_round = m // max(1, m // pp)         torch's ScheduleInterleaved1F1B"""
    if schedule == "gpipe":
        return m * vp
    if schedule == "1f1b":
        return min(m, pp - rank)
    per_round = m // max(1, m // pp)
    return min((vp - 1) * per_round + 2 * (pp - 1 - rank), m * vp)


def interleaved_order(pp: int, vp: int, m: int, rank: int) -> list[tuple[str, int]]:
    """The order in which torch's ``ScheduleInterleaved1F1B`` runs chunk forwards (``"F"``) and
    backwards (``"B"``) on pipeline rank ``rank``, as (kind, local chunk index) pairs.

    Mirrors torch 2.13's ``_get_warmup_ops`` / ``_get_1f1b_rank_ops``: micro-batches go in rounds
    of ``m // max(1, m // pp)``; rank r first runs ``(vp-1)*per_round + 2*(pp-1-r)`` forwards
    (at most m*vp), then one forward and one backward per step, then the remaining backwards.
    Forwards cycle through the local chunks a round at a time, backwards in reverse chunk order.
    (tests/test_cost_schedule.py checks it against torch's own ``pipeline_order``.)"""
    per_round = m // max(1, m // pp)
    warmup = warmup_forwards("interleaved", pp=pp, vp=vp, m=m, rank=rank)
    steady = m * vp - warmup

    def fwd(op: int) -> int:
        return (op // per_round) % vp

    def bwd(op: int) -> int:
        return vp - 1 - ((op - warmup) // per_round) % vp
    out: list[tuple[str, int]] = []
    for op in range(warmup + steady + warmup):
        if op < warmup + steady:
            out.append(("F", fwd(op)))
        if op >= warmup:
            out.append(("B", bwd(op)))
    return out


def schedule_order(schedule: str, *, pp: int, vp: int, m: int, rank: int) -> list[tuple[str, int, int]]:
    """The operations of pipeline ``rank`` in the order torch's schedule runs them:
    ``("F" | "B", global chunk index, micro-batch)``.

    - gpipe (``ScheduleGPipe``): every forward, then every backward, micro-batches in order;
    - 1f1b (``Schedule1F1B``): ``min(m, pp - rank)`` forwards (:func:`warmup_forwards`), then
      backward/forward pairs, then the remaining backwards;
    - interleaved (``ScheduleInterleaved1F1B``): :func:`interleaved_order` (the order the memory
      model follows too), with each chunk's micro-batches numbered in turn.
    """
    if pp == 1 or schedule == "gpipe" or (schedule == "1f1b" and vp == 1):
        if vp != 1:
            raise InputError(f"schedule {schedule} runs one chunk per rank, got vp={vp}")
        fwd = [("F", rank, i) for i in range(m)]
        bwd = [("B", rank, i) for i in range(m)]
        if pp == 1 or schedule == "gpipe":
            return fwd + bwd
        warm = warmup_forwards(schedule, pp=pp, vp=vp, m=m, rank=rank)
        ops = fwd[:warm]
        for k in range(m):
            ops.append(bwd[k])
            if warm + k < m:
                ops.append(fwd[warm + k])
        return ops
    if schedule != "interleaved":
        raise InputError(f"no timeline for schedule {schedule!r}")
    next_mb: dict[tuple[str, int], int] = {}
    ops = []
    for kind, local in interleaved_order(pp, vp, m, rank):
        chunk = local * pp + rank
        i = next_mb.get((kind, chunk), 0)
        next_mb[(kind, chunk)] = i + 1
        ops.append((kind, chunk, i))
    return ops


def rank_order(schedule: str, pp: int, vp: int, m: int, rank: int) -> list[tuple[str, int]]:
    """:func:`schedule_order` of ``rank`` as (kind, local chunk index) pairs, micro-batches dropped:
    what the memory moments follow (chunk ``rank + i*pp`` is local chunk i)."""
    return [(kind, (chunk - rank) // pp) for kind, chunk, _ in schedule_order(schedule, pp=pp, vp=vp, m=m, rank=rank)]


def _undominated(moments: list[tuple[tuple[int, ...], ...]]) -> tuple:
    """The distinct moments no other one equals or exceeds in every entry, sorted."""
    flat = {m: sum(m, ()) for m in moments}
    # a skyline pass: only a moment with a total at least as large can dominate another, and one
    # dominated by a dropped moment is dominated by what dropped it, so each moment is checked
    # against the kept ones only (the schedules' peaks are few; a pipeline has 2*m*vp moments)
    kept: list[tuple[int, ...]] = []
    out = []
    for m, v in sorted(flat.items(), key=lambda mv: -sum(mv[1])):
        if not any(all(a >= b for a, b in zip(w, v)) for w in kept):
            kept.append(v)
            out.append(m)
    return tuple(sorted(out))


@lru_cache(maxsize=8192)
def peak_moments(schedule: str, pp: int, vp: int, m: int, rank: int) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """The moments of a step that can be pipeline rank ``rank``'s memory peak, as ``(held, grads)``:
    ``held[i]`` micro-batches whose activations local chunk i (chunk ``rank + i*pp``) holds, and
    ``grads[i]`` 1 once chunk i has run a backward in this step. Where gradients are made by the
    step's first backward (autoplan's executor: ``LayerCost.late_grad_bytes``), a chunk's gradients
    exist only where ``grads[i]``. A moment is taken after every forward and every backward of
    :func:`rank_order`; one that another equals or exceeds in both is left out::

        no PP           ((1,), (0,))           m = 1: the end of the step's only forward
                        ((1,), (1,))           m > 1: a later micro-batch's, with the gradients
                                               accumulated
        GPipe           ((m,), (0,)), ((m-1,), (1,))      end of the forward; after the first backward
        1F1B, w = min(m, pp - rank)
                        ((w,), (1,))           m > w: a forward after the first backward
                        ((w,), (0,)), ((w-1,), (1,))      m = w: every forward before a backward

    So at m = pp the first rank's pp micro-batches never meet its gradients. Backward frees a
    layer's activations as it makes its gradients, so inside a backward memory lies between the
    moments before and after it (for layers alike; the workspace covers one layer's transient)."""
    if pp == 1:
        return (((1,), (1 if m > 1 else 0,)),)
    if schedule != "interleaved":     # the simulation below, in closed form (GPipe: w = m)
        w = m if schedule == "gpipe" else min(m, pp - rank)
        return (((w,), (1,)),) if m > w else (((w - 1,), (1,)), ((w,), (0,)))
    held, grads = [0] * vp, [0] * vp
    seen = []
    for kind, i in rank_order(schedule, pp, vp, m, rank):
        if kind == "F":
            held[i] += 1
        elif grads[i]:      # the moment before this backward holds more and the same gradients
            held[i] -= 1
            continue
        else:
            held[i] -= 1
            grads[i] = 1
        seen.append((tuple(held), tuple(grads)))
    return _undominated(seen)


@lru_cache(maxsize=8192)
def inflight_vectors(schedule: str, pp: int, vp: int, m: int, rank: int) -> tuple[tuple[int, ...], ...]:
    """Micro-batches whose activations pipeline rank ``rank`` holds per local chunk (chunk
    ``rank + i*pp`` for i = 0..vp-1), at every moment that can be its activation peak (the held
    vectors of :func:`peak_moments` no other exceeds in every chunk). The rank's activation peak is
    the largest ``sum_i n_i * act(chunk i)`` over them::

        no PP           (1,)                   one micro-batch at a time (gradient accumulation)
        GPipe           (m,)                   every forward before the first backward
        1F1B            (min(m, pp - rank),)   Narayanan et al. 2021; torch's Schedule1F1B
        interleaved     simulated from torch's order (:func:`interleaved_order`): uneven chunks
                        matter, e.g. pp=4, vp=2, m=8: rank 1 holds all 8 micro-batches of its
                        first chunk while its second drains
    """
    return tuple(held for (held,) in _undominated([(held,) for held, _ in peak_moments(schedule, pp, vp, m, rank)]))


def pipeline_s(tau: list[float], chunk_s: list[float], layout: PipelineShape) -> float:
    """Time of the pipeline part of a step, from each rank's per-micro-batch time ``tau`` and each
    chunk's ``chunk_s`` (its layers plus the send after it)::

        GPipe, 1F1B    (m - 1) * max_r tau_r + sum_r tau_r       the fill and drain pass each stage once
        interleaved    m * max_r tau_r + (pp - 1) * max_j chunk_j

    With equal chunks both are the classic ``m*tau + (pp-1)*tau/vp``. Interleaved 1F1B fills and
    drains one chunk per step, so the slowest chunk paces the bubble, not the rank's average
    chunk. On torch's order (simulated by :mod:`autoplan.plan.timeline`, pp=2-8, vp=2-3, m=4-16)
    it is exact where every rank's larger chunks come at the same local index, where
    ``(sum tau - max tau)/vp`` is 3-4% short for chunks one block apart; 4% short where the ranks
    differ in which chunk is larger, and 10% short (the old form: 19%) for chunks of 1 block beside
    chunks of 5, where the steady state stalls too."""
    m, p, v = layout.num_microbatches, layout.pp, layout.vp
    t_max = max(tau)
    if v == 1:
        return (m - 1) * t_max + sum(tau)
    return m * t_max + (p - 1) * max(chunk_s)


def shared_device_relief(cluster: ClusterProfile, busy_s: list[float], pipeline_s: float) -> float:
    """Factor (<= 1) on a pipeline's compute and communication where devices share cores.

    Costs of a cluster whose processes share cores (``compute_slowdown`` s > 1: more processes
    than cores) are measured with every process busy. In a pipeline a rank waits for its
    neighbours in the fill, the drain and between micro-batches, and a waiting process leaves its
    core to the others: with a fraction u of the ranks busy on average (the ranks' work over the
    pipeline's length), each computes at s*u of its alone time instead of s (never faster than
    alone)::

        relief = max(1/s, min(1, u)),   u = sum_r busy_r / (pp * pipeline)

    1 without pipelining, and on devices that do not share (GPUs: s = 1). This is the relief of a
    model profile without pipelines measured in groups of the cluster's size; where it has them, the
    cost model follows the schedule moment by moment with what they showed
    (:func:`autoplan.plan.pipeline_costs.pipeline_relief`, :func:`shared_cores_pipeline_s`)."""
    return relief_at(cluster.device.compute_slowdown, busy_s, pipeline_s)


def relief_at(slowdown: float, busy_s: list[float], pipeline_s: float) -> float:
    """:func:`shared_device_relief` for a device ``slowdown`` s."""
    if slowdown <= 1.0 or len(busy_s) < 2 or pipeline_s <= 0:
        return 1.0
    u = sum(busy_s) / (len(busy_s) * pipeline_s)
    return max(1.0 / slowdown, min(1.0, u))


def op_dependency(op: tuple[str, int, int], n_chunks: int) -> tuple[str, int, int] | None:
    """The operation whose output ``op`` (``("F" | "B", chunk, micro-batch)``) needs: a forward the
    previous chunk's forward of its micro-batch, a backward the next chunk's backward (the last chunk's
    backward its own forward); None for the first chunk's forwards."""
    kind, j, i = op
    if kind == "F":
        return ("F", j - 1, i) if j > 0 else None
    return ("B", j + 1, i) if j < n_chunks - 1 else ("F", j, i)


def shared_cores_pipeline_s(forward_s: list[float], backward_s: list[float], *, pp: int, vp: int, m: int,
                            schedule: str, slowdown: float, idle_share: float) -> float:
    """Length of the pipeline part of a step whose ranks share cores, moment by moment.

    ``forward_s[j]``, ``backward_s[j]``: chunk j's forward and backward per micro-batch as measured with
    every process busy (chunk j on rank ``j % pp``). The schedule's own order runs
    (:func:`schedule_order`, an operation starts when its rank is free and its input is there, as
    :func:`autoplan.plan.timeline.simulate_pipeline` draws it), and at every moment the k busy ranks share
    what the cores give (processor sharing)::

        speed = min(1, (pp / s) / (k + (1 - e) * (pp - k)))     of a rank's speed alone

    ``s`` (``slowdown``): every process busy runs s times slower than one alone, so the cores give
    pp/s ranks' worth of speed alone; ``e`` (``idle_share``): how much of its core a waiting rank
    leaves to the others. With every rank busy each runs at its measured in-group speed (1/s of
    alone); a rank that runs while others wait goes faster, never faster than alone. Data-parallel,
    tensor- and context-parallel replicas of the pipeline run the same schedule in step, so the ratio
    holds for the whole group. :func:`relief_at` spreads the same capacity over the step as an
    average (every moment as busy as the mean); this follows the fill, the drain and the waits of the
    schedule's order as they fall, where only some ranks run."""
    n_chunks = pp * vp
    orders = [schedule_order(schedule, pp=pp, vp=vp, m=m, rank=r) for r in range(pp)]
    capacity = pp / slowdown
    pos = [0] * pp
    left: list[float | None] = [None] * pp         # alone-seconds left of the running operation
    done: set[tuple[str, int, int]] = set()
    t = 0.0
    while True:
        for r in range(pp):
            if left[r] is None and pos[r] < len(orders[r]):
                op = orders[r][pos[r]]
                dep = op_dependency(op, n_chunks)
                if dep is None or dep in done:
                    left[r] = (forward_s if op[0] == "F" else backward_s)[op[1]] / slowdown
        busy = [r for r in range(pp) if left[r] is not None]
        if not busy:
            break
        speed = min(1.0, capacity / (len(busy) + (1.0 - idle_share) * (pp - len(busy))))
        dt = min(left[r] for r in busy) / speed
        t += dt
        for r in busy:
            left[r] -= dt * speed
            if left[r] <= 1e-12 * (1.0 + dt):
                done.add(orders[r][pos[r]])
                pos[r] += 1
                left[r] = None
    if any(pos[r] < len(orders[r]) for r in range(pp)):
        raise InputError(f"schedule {schedule} deadlocks with pp={pp} vp={vp} m={m}")
    return t


def inflight_microbatches(layout: PipelineShape, rank: int) -> float:
    """Micro-batches of activations pipeline rank ``rank`` holds at its peak when its layers are
    spread evenly over its chunks: the largest total of :func:`inflight_vectors` over vp
    (the tied placement ILP and the search's bounds use it; :func:`evaluate` uses the vectors)."""
    vecs = inflight_vectors(pipeline_schedule(layout), layout.pp, layout.vp,
                            layout.num_microbatches, rank)
    return max(sum(v) for v in vecs) / layout.vp


def inflight_floor(layout: PipelineShape, rank: int) -> int:
    """Micro-batches every local chunk of ``rank`` holds at once at some moment: the largest
    smallest entry of :func:`inflight_vectors`, so ``inflight_floor * sum_i x_i`` never exceeds the
    peak of ``sum_i n_i * x_i`` whatever the chunks' ``x_i`` (the count of 1F1B and GPipe; a lower
    bound with interleaving, which tied.py's relaxation uses for the held outputs)."""
    vecs = inflight_vectors(pipeline_schedule(layout), layout.pp, layout.vp,
                            layout.num_microbatches, rank)
    return max(min(v) for v in vecs)


def grads_at_inflight_peak(layout: PipelineShape, rank: int) -> int:
    """1 when every local chunk of ``rank`` has run a backward at a moment it holds the most
    micro-batches (:func:`inflight_microbatches`'s moment), else 0: whether a bound taken at that
    moment may count the gradients that backward makes (``LayerCost.late_grad_bytes``)."""
    moments = peak_moments(pipeline_schedule(layout), layout.pp, layout.vp, layout.num_microbatches, rank)
    top = max(sum(held) for held, _ in moments)
    return max(min(grads) for held, grads in moments if sum(held) == top)


def grads_made_with(layout: PipelineShape, rank: int, k: float) -> bool:
    """Whether ``rank`` has a moment holding at least ``k`` micro-batches per local chunk on
    average (:func:`inflight_microbatches`' measure) with every chunk's gradients made: a bound
    taken with ``k`` in flight may then count the gradients backward makes."""
    moments = peak_moments(pipeline_schedule(layout), layout.pp, layout.vp, layout.num_microbatches, rank)
    return any(min(grads) and sum(held) >= k * layout.vp for held, grads in moments)


def peak_activation_bytes(layout: PipelineShape, rank: int, chunk_act_bytes: list[float]) -> float:
    """The activation peak of ``rank`` whose local chunks hold ``chunk_act_bytes`` per micro-batch."""
    return peak_inflight_bytes(layout, rank, chunk_act_bytes, [0.0] * len(chunk_act_bytes))[0]


def memory_moments(layout: PipelineShape, rank: int, late_grads: bool) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """The ``(held, grads)`` moments that can be ``rank``'s memory peak: :func:`peak_moments` where
    some layer's gradients are made late (``late_grads``), else :func:`inflight_vectors` with every
    gradient there (fewer moments: the others hold less)."""
    schedule = pipeline_schedule(layout)
    if late_grads:
        return peak_moments(schedule, layout.pp, layout.vp, layout.num_microbatches, rank)
    return tuple((held, (1,) * layout.vp)
                 for held in inflight_vectors(schedule, layout.pp, layout.vp, layout.num_microbatches, rank))


def peak_inflight_bytes(layout: PipelineShape, rank: int, chunk_act_bytes: list[float], chunk_held_bytes: list[float],
                        chunk_late_grad_bytes: list[float] | None = None) -> tuple[float, float, float]:
    """``(activations, held outputs, gradients not made yet)`` of ``rank`` at its peak moment
    (:func:`memory_moments`): the one where activations + held outputs - gradients not made yet is
    largest, its local chunks holding ``chunk_act_bytes`` and ``chunk_held_bytes`` per in-flight
    micro-batch and making ``chunk_late_grad_bytes`` of gradients in their first backward (None:
    every gradient counted at every moment)."""
    late = chunk_late_grad_bytes or [0.0] * layout.vp
    parts = [(sum(n * a for n, a in zip(held, chunk_act_bytes)), sum(n * h for n, h in zip(held, chunk_held_bytes)),
              sum(x for g, x in zip(grads, late) if not g))
             for held, grads in memory_moments(layout, rank, any(late))]
    return max(parts, key=lambda x: x[0] + x[1] - x[2])
