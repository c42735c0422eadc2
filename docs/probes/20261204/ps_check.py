"""Prototype: processor-sharing pipeline model with its per-chunk and per-step costs refitted to the profile's runs."""
import json, sys, math
from dataclasses import replace
sys.path.insert(0, "/work/exp")
from ps import ps_makespan
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.plan.coefficients import costs_for_layout
from autoplan.plan.timeline import chunk_times, ChunkTimes, forward_fraction
from autoplan.plan import pipeline_costs as pc
import numpy as np

wd = sys.argv[1]; gb = int(sys.argv[2]); runs_file = sys.argv[3] if len(sys.argv) > 3 else f"{wd}/runs.json"
pb = make_problem(f"{wd}/model.json", f"{wd}/cluster.json", gb, memory_per_device_bytes=2**30)
prof = pb.profile; world = pb.cluster.world_size
ff = forward_fraction(prof, Layout(mbs=1))["block"]
def run_chunks(t, unit, a):
    b = [sum(t.chunks[:j]) for j in range(len(t.chunks) + 1)]
    return [ChunkTimes(sum(unit[x:y]) * ff + a / 2, 0, 0, 0, sum(unit[x:y]) * (1 - ff) + a / 2) for x, y in zip(b, b[1:])]
fits = {}
for pp in sorted({t.pp for t in prof.pipeline_timings}):
    mbs = min(t.mbs for t in prof.pipeline_timings)
    runs = [t for t in pc.on_layer_scale(prof, [t for t in prof.pipeline_timings if t.mbs == mbs]) if t.pp == pp]
    unit = pc._unit_times(prof, world, mbs)
    lone = [t.reference_s / t.lone_reference_s for t in runs if t.lone_reference_s > 0]
    s = max(1.0, sorted(lone)[len(lone)//2])
    cores = world / s
    best = None
    grid = np.arange(0, 0.0401, 0.001)
    for a1 in grid:
        for av in grid:
            if not any(t.vp > 1 for t in runs) and av != a1: continue
            mk = [ps_makespan(run_chunks(t, unit, av if t.vp > 1 else a1), t.pp, t.vp, t.num_microbatches, t.schedule,
                              cores * t.pp / world, s) for t in runs]
            # c >= 0 by weighted least squares in relative error
            w = [1 / t.step_s for t in runs]
            c = max(0.0, sum((t.step_s - m) * wi * wi for t, m, wi in zip(runs, mk, w)) / sum(wi * wi for wi in w))
            err = sum(((m + c - t.step_s) / t.step_s) ** 2 for t, m in zip(runs, mk))
            if best is None or err < best[0]: best = (err, a1, av, c, s, cores)
    fits[pp] = best
    print(f"pp{pp}: a1 {best[1]*1e3:.1f} ms av {best[2]*1e3:.1f} ms c {best[3]*1e3:.1f} ms s {best[4]:.3f} rms {math.sqrt(best[0]/len(runs)):.3f}")
d = json.load(open(runs_file))
truth = {}
rows = []
for i in range(len(d["confirmed"])):
    lay = Layout.from_dict(d["confirmed"][i]["layout"])
    pred = estimate_problem(pb, lay); pred = pred[1] if isinstance(pred, tuple) else pred
    costs = costs_for_layout(pb.profile, pb.cluster, lay, pb.train)
    ch = chunk_times(pb.profile, lay, costs)
    err, a1, av, c, s, cores = fits[min(fits, key=lambda p: (abs(math.log(p / lay.pp)), p))]
    a = av if lay.vp > 1 else a1
    ch = [replace(x, forward_s=x.forward_s + a/2, backward_s=x.backward_s + a/2) for x in ch]
    mk = ps_makespan(ch, lay.pp, lay.vp, lay.num_microbatches, lay.schedule, cores / lay.dp, s)
    ps = mk + c + pred.breakdown_s.get("dp_sync", 0) + pred.breakdown_s.get("optimizer", 0)
    t = truth.get(i, d["confirmed"][i]["measured"]["step_time_s"])
    if lay.pp == 1: ps = pred.step_time_s
    rows.append((lay, pred.step_time_s, ps, t))
    print(f"{lay.short():58s} model {pred.step_time_s:.3f} ({pred.step_time_s/t-1:+.1%})  ps-refit {ps:.3f} ({ps/t-1:+.1%})  meas {t:.3f}")
fast = min(r[3] for r in rows)
for k, name in ((1, "model"), (2, "ps-refit")):
    ch = min(rows, key=lambda r: r[k])
    print(f"{name} chooses {ch[0].short()}: {ch[3]/fast-1:+.1%} over the fastest measured; error {sum(abs(r[k]/r[3]-1) for r in rows)/len(rows):.1%}")
