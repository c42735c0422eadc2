import sys, copy
sys.path.insert(0, "/work/main/docs/probes/20261204")
import ps as P_
import autoplan.plan.pipeline_costs as pc
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.coefficients import costs_for_layout
from autoplan.plan.plan import Layout
from autoplan.plan.timeline import chunk_times
from autoplan.profile.formats import ModelProfile
prof, mbs, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
Pm = ModelProfile.load(prof); q = copy.deepcopy(Pm); q.pipeline_timings = [t for t in Pm.pipeline_timings if t.mbs == 1]
q.pipeline_costs = [pc.fit_pipeline_costs(q, 3, c.pp) for c in Pm.pipeline_costs]; q.save("/tmp/sp.json")
pb = make_problem("/tmp/sp.json", "/work/exp/f20/w5/cluster.json", mbs * m, memory_per_device_bytes=2**30)
names = pb.profile.layer_names()
pipe = q.pipeline_costs[0]
for sp in sys.argv[4:]:
    sp = [int(x) for x in sp.split("-")]
    b = [sum(sp[:j]) for j in range(len(sp) + 1)]
    lay = Layout(pp=len(sp), vp=1, num_microbatches=m, schedule="1f1b", mbs=mbs, stages=[names[x:y] for x, y in zip(b, b[1:])])
    _, pred = estimate_problem(pb, lay)
    ch = chunk_times(pb.profile, lay, costs_for_layout(pb.profile, pb.cluster, lay, pb.train))
    a, c, s = pc.per_chunk_s(pipe, lay), pipe.per_step_s, pipe.slowdown
    mk = P_.ps_makespan(P_.with_chunk_cost(ch, a), lay.pp, 1, m, "1f1b", 3 / s, s) + c
    print(sp, f"model {pred.step_time_s*1e3:.1f} ms   ps {mk*1e3:.1f} ms   chunks {[round((x.forward_s+x.backward_s)*1e3,1) for x in ch]}")
