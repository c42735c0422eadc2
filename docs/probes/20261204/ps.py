"""Prototype (not part of autoplan): a pipeline on shared cores by processor sharing over torch's own order.

    python ps.py WORKDIR GB [--runs RUNS_JSON] [--truth '{"0": 1.142, ...}'] [--no-refit]

Each rank runs its operations in ``schedules.schedule_order``; an operation starts when its input is there; the
ranks with an operation in hand share ``world / s`` cores (s: the slowdown the profile's pipeline runs measured),
each at ``min(1, cores / ready)`` of its alone speed. Per-chunk and per-step costs: refitted to the profile's own
pipeline runs under this model (grid search), or with ``--no-refit`` the profile's fitted ones. Predicts the
``confirmed`` layouts of a fidelity workload's runs.json (medians as the measurement unless ``--truth`` gives
some by index) and says what the cost model and the prototype would choose."""
import argparse
import json
import math
from dataclasses import replace

import numpy as np

from autoplan.plan import pipeline_costs as pc
from autoplan.plan.api import estimate_problem, make_problem
from autoplan.plan.coefficients import costs_for_layout
from autoplan.plan.plan import Layout
from autoplan.plan.schedules import schedule_order
from autoplan.plan.timeline import ChunkTimes, chunk_times, forward_fraction


def ps_makespan(chunks, pp, vp, m, schedule, cores, slowdown):
    n_chunks = pp * vp
    orders = [schedule_order(schedule, pp=pp, vp=vp, m=m, rank=r) for r in range(pp)]

    def dur(op):
        k, j, _ = op
        c = chunks[j]
        return (c.forward_s + c.send_s) if k == "F" else (c.recv_grad_s + c.recompute_s + c.backward_s)

    def dep(op):
        k, j, i = op
        if k == "F":
            return ("F", j - 1, i) if j > 0 else None
        return ("B", j + 1, i) if j < n_chunks - 1 else ("F", j, i)
    done, pos, rem, t = set(), [0] * pp, [None] * pp, 0.0

    def start(r):
        rem[r] = None
        if pos[r] < len(orders[r]):
            op = orders[r][pos[r]]
            d = dep(op)
            if d is None or d in done:
                rem[r] = dur(op) / slowdown      # alone seconds
    for r in range(pp):
        start(r)
    while any(pos[r] < len(orders[r]) for r in range(pp)):
        act = [r for r in range(pp) if rem[r] is not None]
        if not act:
            raise RuntimeError("deadlock")
        rate = min(1.0, cores / len(act))
        dt = min(rem[r] for r in act) / rate
        t += dt
        for r in act:
            rem[r] -= dt * rate
        for r in act:
            if rem[r] <= 1e-12:
                done.add(orders[r][pos[r]])
                pos[r] += 1
                rem[r] = None
        for r in range(pp):
            if rem[r] is None:
                start(r)
    return t


def with_chunk_cost(chunks, a):
    return [replace(c, forward_s=c.forward_s + a / 2, backward_s=c.backward_s + a / 2) for c in chunks]


def refit(pb):
    """Per depth: (1F1B per-chunk, interleaved per-chunk, per-step, slowdown, cores) fitted to the profile's runs."""
    prof, world = pb.profile, pb.cluster.world_size
    ff = forward_fraction(prof, Layout(mbs=1))["block"]
    mbs = min(t.mbs for t in prof.pipeline_timings)
    unit = pc._unit_times(prof, world, mbs)

    def run_chunks(t, a):
        b = [sum(t.chunks[:j]) for j in range(len(t.chunks) + 1)]
        return [ChunkTimes(sum(unit[x:y]) * ff + a / 2, 0, 0, 0, sum(unit[x:y]) * (1 - ff) + a / 2)
                for x, y in zip(b, b[1:])]
    fits = {}
    for pp in sorted({t.pp for t in prof.pipeline_timings}):
        runs = [t for t in pc.on_layer_scale(prof, [t for t in prof.pipeline_timings if t.mbs == mbs]) if t.pp == pp]
        lone = [t.reference_s / t.lone_reference_s for t in runs if t.lone_reference_s > 0]
        s = max(1.0, sorted(lone)[len(lone) // 2])
        cores = world / s
        best = None
        grid = np.arange(0, 0.0401, 0.001)
        for a1 in grid:
            for av in grid:
                if not any(t.vp > 1 for t in runs) and av != a1:
                    continue
                mk = [ps_makespan(run_chunks(t, av if t.vp > 1 else a1), t.pp, t.vp, t.num_microbatches, t.schedule,
                                  cores * t.pp / world, s) for t in runs]
                w = [1 / t.step_s for t in runs]      # c >= 0 by least squares in relative error
                c = max(0.0, sum((t.step_s - x) * wi * wi for t, x, wi in zip(runs, mk, w)) / sum(wi * wi for wi in w))
                err = sum(((x + c - t.step_s) / t.step_s) ** 2 for t, x in zip(runs, mk))
                if best is None or err < best[0]:
                    best = (err, a1, av, c, s, cores)
        err, a1, av, c, s, cores = best
        print(f"pp{pp}: a1 {a1 * 1e3:.1f} ms av {av * 1e3:.1f} ms c {c * 1e3:.1f} ms s {s:.3f} "
              f"rms {math.sqrt(err / len(runs)):.3f}")
        fits[pp] = (a1, av, c, s, cores)
    return fits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("global_batch", type=int)
    ap.add_argument("--runs", default=None, help="runs.json (default: WORKDIR/runs.json)")
    ap.add_argument("--truth", default="{}", help="JSON {index: seconds} in place of runs.json's medians")
    ap.add_argument("--no-refit", action="store_true", help="the profile's own per-chunk and per-step costs")
    args = ap.parse_args()
    wd = args.workdir
    pb = make_problem(f"{wd}/model.json", f"{wd}/cluster.json", args.global_batch, memory_per_device_bytes=2**30)
    d = json.load(open(args.runs or f"{wd}/runs.json"))
    truth = {int(k): v for k, v in json.loads(args.truth).items()}
    fits = None if args.no_refit else refit(pb)
    rows = []
    for i, r in enumerate(d["confirmed"]):
        lay = Layout.from_dict(r["layout"])
        pred = estimate_problem(pb, lay)
        pred = pred[1] if isinstance(pred, tuple) else pred
        ps = pred.step_time_s
        if lay.pp > 1:
            ch = chunk_times(pb.profile, lay, costs_for_layout(pb.profile, pb.cluster, lay, pb.train))
            if fits is None:
                pipe = pc.pipeline_costs_for(pb.profile, pb.cluster.world_size, lay.pp)
                a, c, s = pc.per_chunk_s(pipe, lay), pipe.per_step_s, pipe.slowdown
                cores = pb.cluster.world_size / s
            else:
                a1, av, c, s, cores = fits[min(fits, key=lambda p: (abs(math.log(p / lay.pp)), p))]
                a = av if lay.vp > 1 else a1
            # dp > 1: several pipelines share the cores, each gets cores / dp
            mk = ps_makespan(with_chunk_cost(ch, a), lay.pp, lay.vp, lay.num_microbatches, lay.schedule,
                             cores / lay.dp, s)
            ps = mk + c + pred.breakdown_s.get("dp_sync", 0) + pred.breakdown_s.get("optimizer", 0)
        t = truth.get(i, r["measured"]["step_time_s"])
        rows.append((lay, pred.step_time_s, ps, t))
        print(f"{lay.short():58s} model {pred.step_time_s:.3f} ({pred.step_time_s / t - 1:+.1%})  "
              f"ps {ps:.3f} ({ps / t - 1:+.1%})  meas {t:.3f}{' *' if i in truth else ''}")
    fast = min(x[3] for x in rows)
    for k, name in ((1, "model"), (2, "ps")):
        best = min(rows, key=lambda x: x[k])
        print(f"{name} chooses {best[0].short()}: {best[3] / fast - 1:+.1%} over the fastest measured; "
              f"error {sum(abs(x[k] / x[3] - 1) for x in rows) / len(rows):.1%}")


if __name__ == "__main__":
    main()
