"""Short real pipelines of the model, measured inside the group job (``profile model --nproc N``).

The layers' in-group figures (:mod:`autoplan.execute.group_profile`) say what a chunk's layers cost
with every process busy. A pipeline step costs more than its layers: each chunk runs a forward and a
backward action per micro-batch through torch's schedule, sends and receives a message per action,
and its rank waits for its neighbours, which on processes that share cores lends (or does not lend)
the core to the others. Here the executor's own pipeline runs (:func:`autoplan.execute.pp.split_model`,
:func:`autoplan.execute.pp.build_schedule`: just-in-time receive buffers, torch's ``Schedule1F1B`` and
``ScheduleInterleaved1F1B``) for a few steps, every rank of the job in a pipeline at once::

    pipelines of pp = 2 consecutive ranks tiling the job (pp = N where N is odd), chunks balanced by
                 the units' in-group times (balanced_chunks); where N is even and above 2, again as one
                 pipeline of pp = N over every rank
    1F1B         m = pp and m = 4 pp
    interleaved  vp = 2, m = pp and m = 4 pp        (where the model has 2 pp units)
                 vp = 4 (else 3), m = pp and 4 pp   (where it has 4 pp, or 3 pp, units)
    micro-batch  the smallest profiled size

Each figure is the slowest rank's median step over ``repeats`` steps, each behind a barrier of the job,
the runs timed in turn (one step of each per round: the fit compares them with each other, and the
machine's speed drifts over the minute they take; measured again while other programs load the CPU,
as the layer cases). Before each step every rank
runs the whole model's forward and backward once on its own (the in-group whole-model case,
``reference_s``), then rank 0 runs it once more while the other ranks wait in a barrier
(``lone_reference_s``): their ratio is how much faster one rank computes while the others wait, which
bounds what a waiting pipeline rank can lend. (The references no longer rescale the steps:
:func:`~autoplan.plan.pipeline_costs.fit_pipeline_costs` says why.) What a step costs beyond the
layers is derived from these runs by :func:`autoplan.plan.pipeline_costs.fit_pipeline_costs`.
:func:`autoplan.execute.group_measure.measure_pipelines` times them.

Why balanced chunks: the planner balances its stages, and the fit's terms are right where its runs
look like the pipelines the planner picks. Run with even chunks (the last, heaviest, holding the head),
the runs had a stage the cost model prices far dearer than it ran: on 3 processes sharing 2 cores the
balanced and the even splits of the same small models ran within 0-14% of each other (the balanced one
often the slower), where the model prices the balanced one 10-16% faster, and the terms fitted on the
even runs left the planner's balanced pipelines under-predicted by the difference. Both splits in one
job per workload, each fit re-predicting the layouts `validate` measured (2026-12-04, six workloads of
fidelity seeds 20261216-20, ``docs/fidelity.md``): pipelines -8.4% on the mean from the balanced runs,
-10.7% from the even ones (-5.5 / -14.5% and -10.3 / -15.6% on the two 5-block models).
"""

from __future__ import annotations

from typing import Callable

PIPELINES = "(pipelines)"
"""key of the pipeline runs among the per-kind timings a group job returns"""

PIPELINE_SCHEDULES = ((1, "1f1b"), (2, "interleaved"))
"""(vp, schedule) of the measured runs"""

DEEP_INTERLEAVE = (4, 3)
"""interleaved again at the first of these chunk counts the model has units for: with vp = 2 alone
a cost per chunk cannot be told from the schedule's own shape (both grow with m), and on 2 CPU
processes a step at vp = 4 measured 26% above the same micro-batches at vp = 2 where the layers'
time says they are equal (the same layers on each rank; workload 5 of fidelity seed 20261204)"""

MICROBATCH_FACTORS = (1, 4)
"""micro-batches of the measured runs, in multiples of pp: one where the fill and drain dominate,
one where the steady state does"""


def pipeline_depths(world: int, units: int) -> list[int]:
    """The pipeline depths measured in a job of ``world`` processes: 2 (pipelines tiling the job) and
    ``world`` (one pipeline over every rank) where ``world`` is even, else ``world``; each only where
    the model has a unit per stage. Both, because what a step costs beyond its layers depends on the
    depth: on 4 processes sharing 2 cores, 4-stage pipelines ran 13-33% above what the 2-stage runs
    said, the gap growing by ~7 ms per micro-batch (fidelity seed 20261212, workload 4)."""
    if world < 2:
        return []
    depths = [2, world] if world % 2 == 0 and world > 2 else [world]
    return [pp for pp in depths if units >= pp]


def pipeline_cases(world: int, units: int) -> list[tuple[int, int, str, int]]:
    """(pp, vp, schedule, num_microbatches) of every run in a job of ``world`` processes for a model
    of ``units`` units (none on one process): per depth of :func:`pipeline_depths`, 1F1B and the
    interleaves the model has units for, each at few and many micro-batches."""
    out = []
    for pp in pipeline_depths(world, units):
        runs = [(vp, schedule) for vp, schedule in PIPELINE_SCHEDULES if units >= pp * vp]
        deep = next((vp for vp in DEEP_INTERLEAVE if units >= pp * vp), None)
        if deep is not None:
            runs.append((deep, "interleaved"))
        out += [(pp, vp, schedule, k * pp) for vp, schedule in runs for k in MICROBATCH_FACTORS]
    return out


def even_chunks(units: int, chunks: int) -> tuple[int, ...]:
    """``units`` split into ``chunks`` contiguous chunks as evenly as possible (the later ones larger:
    the last holds the head, the first the light embedding)."""
    base, extra = divmod(units, chunks)
    return tuple(base + (1 if j >= chunks - extra else 0) for j in range(chunks))


def balanced_chunks(unit_s: list[float], chunks: int) -> tuple[int, ...]:
    """The units (of times ``unit_s``, in model order) split into ``chunks`` contiguous chunks with the
    smallest largest chunk, and among those the smallest sum of squared chunk times: the split a planner
    balancing the stages picks (the light embedding joins the first blocks, the heavy head fewer)."""
    n = len(unit_s)
    if not 1 <= chunks <= n:
        raise ValueError(f"cannot split {n} units into {chunks} non-empty chunks")
    pre = [0.0]
    for x in unit_s:
        pre.append(pre[-1] + x)

    def split(limit: float) -> tuple[int, ...] | None:
        """The split with every chunk <= limit and the smallest sum of squares (None: there is none)."""
        # best[k][i]: (sum of squares, sizes) of units i.. in k chunks
        best: list[dict[int, tuple[float, tuple[int, ...]]]] = [{n: (0.0, ())}] + [{} for _ in range(chunks)]
        for k in range(1, chunks + 1):
            for i in range(n - k, -1, -1):
                for j in range(i + 1, n - k + 2):
                    c = pre[j] - pre[i]
                    if c > limit:
                        break
                    rest = best[k - 1].get(j)
                    if rest is not None and (i not in best[k] or c * c + rest[0] < best[k][i][0]):
                        best[k][i] = (c * c + rest[0], (j - i,) + rest[1])
        got = best[chunks].get(0)
        return None if got is None else got[1]
    # the smallest feasible largest chunk is one of the contiguous sums
    sums = sorted({pre[j] - pre[i] for i in range(n) for j in range(i + 1, n + 1)})
    lo, hi = 0, len(sums) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if split(sums[mid] * (1 + 1e-12)) is None:
            lo = mid + 1
        else:
            hi = mid
    return split(sums[lo] * (1 + 1e-12))


def pipeline_step(job, pp: int, vp: int, schedule: str, m: int, mbs: int, device,
                  sizes: tuple[int, ...] | None = None) -> tuple[tuple[int, ...], Callable[[], None]]:
    """(the chunk sizes, one step's closure) of this rank's part of a pipeline run in the job ``job``
    (a group_measure ``_Job``): pipelines of ``pp`` consecutive ranks, the executor's chunks and schedule,
    gradients cleared after each step (the executor's optimizer step clears them). ``sizes``: units per
    chunk (default :func:`even_chunks`)."""
    from autoplan.execute.apply import token_cross_entropy
    from autoplan.execute.pp import build_schedule, split_model, stage_ids
    from autoplan.models.registry import sample_tokens
    names = job.model.unit_names()
    sizes = sizes or even_chunks(len(names), pp * vp)
    if len(sizes) != pp * vp or sum(sizes) != len(names):
        raise ValueError(f"chunk sizes {sizes} do not split {len(names)} units into {pp * vp} chunks")
    bounds = [sum(sizes[:j]) for j in range(len(sizes) + 1)]
    stages = [names[a:b] for a, b in zip(bounds, bounds[1:])]
    ids = stage_ids(job.rank % pp, pp=pp, vp=vp)
    chunks = [c.to(device).train() for c in split_model(job.model, stages, ids)]
    sched = build_schedule(chunks, ids, num_stages=pp * vp, schedule=schedule, n_microbatches=m,
                           loss_fn=token_cross_entropy, device=device, group=job.group_mesh(pp).get_group())
    pipeline = job.rank // pp
    tokens = sample_tokens(job.vocab, mbs * m, job.seq_len, job.cfg.seed + pipeline).to(device)
    labels = sample_tokens(job.vocab, mbs * m, job.seq_len, job.cfg.seed + 1000 + pipeline).to(device)
    first, last = 0 in ids, pp * vp - 1 in ids

    def step() -> None:
        sched.step(*((tokens,) if first else ()), target=labels if last else None, losses=[], return_outputs=False)
        for c in chunks:
            for p in c.parameters():
                p.grad = None
    return sizes, step
