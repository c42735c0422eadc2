"""usage: arms.py WORKDIR NEWPROFILE -> the model's pick judged on the stored in-turn jobs, three arms"""
import sys, math, copy
sys.path.insert(0, __import__('os').path.dirname(__file__))
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
from retro import key, load_runs
wl, new = sys.argv[1], sys.argv[2]
d, _, j1, j2 = load_runs(wl)
pool = {k: math.sqrt(j1[k]*j2[k]) for k in j1 if k in j2} or j1
p = ModelProfile.load(new)
small = copy.deepcopy(p); small.pipeline_costs = [c for c in p.pipeline_costs if c.mbs == min(x.mbs for x in p.pipeline_costs)]
small.save('/tmp/arm_small.json')
out = {}
for arm, prof in (("stored", f"{wl}/model.json"), ("fresh mbs1 only", "/tmp/arm_small.json"), ("fresh two sizes", new)):
    pb = make_problem(prof, f"{wl}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
    pred = {}
    for r in d["runs"]:
        _, pr = estimate_problem(pb, Layout.from_dict(r["layout"])); pred[key(r["layout"])] = pr.step_time_s
    timed = [k for k in pred if k in pool]
    ch = min(timed, key=pred.get)
    errs = [pred[k]/pool[k]-1 for k in timed]
    # rank-consistency: pairwise order agreement among timed
    pairs = [(a,b) for a in timed for b in timed if a < b]
    agree = sum((pred[a]-pred[b])*(pool[a]-pool[b]) > 0 for a,b in pairs)/max(1,len(pairs))
    out[arm] = (pool[ch]/min(pool.values())-1, sum(map(abs,errs))/len(errs), agree)
    print(f"  {arm:16s} pick {out[arm][0]:+6.1%}  |err| {out[arm][1]:5.1%}  pair order {agree:.2f}  {ch}")
print("  costs:", [(c.pp, c.mbs, round(c.per_chunk_s*1e3,2), round(c.per_chunk_interleaved_s*1e3,2), c.idle_share, c.slowdown, c.fit_error) for c in p.pipeline_costs])
