"""The processor-sharing prototype against today's model on every measured fidelity workload (medians)."""
import sys, glob, os, json, math, statistics as st, io, contextlib
sys.path.insert(0, "/work/main/docs/probes/20261204")
import ps as P_
import autoplan.plan.pipeline_costs as pc
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.coefficients import costs_for_layout
from autoplan.plan.plan import Layout
from autoplan.plan.timeline import chunk_times
tot = {"model": [], "ps": []}
for wd in sorted(w for a in sys.argv[1:] for w in glob.glob(a) if os.path.exists(w + "/runs.json")):
    d = json.load(open(f"{wd}/runs.json")); meas = {}
    for r in d["runs"] + d.get("confirmed", []):
        meas.setdefault(Layout.from_dict(r["layout"]).short(), (r["layout"], []))[1].append(r["measured"]["step_time_s"])
    if not any(Layout.from_dict(l).pp > 1 for l, _ in meas.values()): continue
    pb = make_problem(f"{wd}/model.json", f"{wd}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
    with contextlib.redirect_stdout(io.StringIO()):
        fits = P_.refit(pb)
    rows = []
    for k, (l, v) in meas.items():
        lay = Layout.from_dict(l); pred = estimate_problem(pb, lay)[1]; ps = pred.step_time_s
        if lay.pp > 1:
            ch = chunk_times(pb.profile, lay, costs_for_layout(pb.profile, pb.cluster, lay, pb.train))
            a1, av, c, s, cores = fits[min(fits, key=lambda p: (abs(math.log(p / lay.pp)), p))]
            mk = P_.ps_makespan(P_.with_chunk_cost(ch, av if lay.vp > 1 else a1), lay.pp, lay.vp, lay.num_microbatches, lay.schedule, cores / (lay.dp * lay.tp * lay.cp), s)
            ps = mk + c + pred.breakdown_s.get("dp_sync", 0) + pred.breakdown_s.get("optimizer", 0)
        rows.append((pred.step_time_s, ps, st.median(v), lay.pp > 1))
    fast = min(x[2] for x in rows); line = [wd]
    for i, name in ((0, "model"), (1, "ps")):
        err = st.mean(abs(x[i] / x[2] - 1) for x in rows); pipe = st.mean(x[i] / x[2] - 1 for x in rows if x[3])
        pick = min(rows, key=lambda x: x[i])[2] / fast - 1
        tot[name].append((err, pipe, pick)); line.append(f"{name} {err:.1%} pipes {pipe:+.1%} pick {pick:+.1%}")
    print(" | ".join(line), flush=True)
for name, r in tot.items():
    print(f"{name:6s} n={len(r)} mean|err| {st.mean(x[0] for x in r):.1%} pipes {st.mean(x[1] for x in r):+.1%} picks>5% {sum(x[2] > 0.05 for x in r)} mean pick {st.mean(x[2] for x in r):+.1%}")
