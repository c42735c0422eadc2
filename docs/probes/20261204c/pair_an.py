"""Paired: one profile job ran every pipeline case twice (balanced chunks, then even chunks); refit the
pipeline costs from each half and re-predict the workload's measured layouts."""
import json, sys, copy, statistics as st
import autoplan.plan.pipeline_costs as pc
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
tot = {"balanced": [], "even": []}
for wl in sys.argv[1:]:
    n = wl.replace("/", "_")
    try:
        P = ModelProfile.load(f"/work/exp/pair2/{n}.json")
    except FileNotFoundError:
        continue
    d = json.load(open(f"/work/exp/{wl}/runs.json")); meas = {}
    for r in d["runs"] + d.get("confirmed", []):
        meas.setdefault(Layout.from_dict(r["layout"]).short(), (r["layout"], []))[1].append(r["measured"]["step_time_s"])
    world = d["workload"]["world"]
    for name, runs in (("balanced", P.pipeline_timings[0::2]), ("even", P.pipeline_timings[1::2])):
        q = copy.deepcopy(P); q.pipeline_timings = runs
        q.pipeline_costs = [c for c in (pc.fit_pipeline_costs(q, world, pp) for pp in sorted({t.pp for t in runs})) if c]
        q.save("/tmp/an2.json")
        pb = make_problem("/tmp/an2.json", f"/work/exp/{wl}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
        out = [(estimate_problem(pb, Layout.from_dict(l))[1].step_time_s, st.median(v), Layout.from_dict(l).pp > 1, k) for k, (l, v) in meas.items()]
        errs = [p / m - 1 for p, m, _, _ in out]; pipe = [p / m - 1 for p, m, pp, _ in out if pp]
        pick = min(out); fast = min(x[1] for x in out)
        tot[name].append((st.mean(map(abs, errs)), st.mean(pipe), pick[1] / fast - 1))
        cs = "; ".join(f"pp{c.pp} a {c.per_chunk_s*1e3:.2f}/{c.per_chunk_interleaved_s*1e3:.2f} c {c.per_step_s*1e3:.1f} e {c.idle_share} err {c.fit_error:.3f}" for c in q.pipeline_costs)
        print(f"{wl:8s} {name:8s} mean|err| {st.mean(map(abs, errs)):.1%} pipes {st.mean(pipe):+.1%} ({min(pipe):+.1%}..{max(pipe):+.1%}) pick {pick[1]/fast-1:+.1%}  [{cs}]")
    print("   runs (balanced / even):", [(t.pp, t.vp, t.num_microbatches, round(a.step_s, 4), round(t.step_s, 4), a.chunks, t.chunks) for a, t in zip(P.pipeline_timings[0::2], P.pipeline_timings[1::2])])
for name, r in tot.items():
    if r: print(f"{name:8s} n={len(r)} mean|err| {st.mean(x[0] for x in r):.1%} pipes {st.mean(x[1] for x in r):+.1%} picks>5% {sum(x[2] > 0.05 for x in r)}")
