"""Where validate measured the very layout a stored profile ran as one of its pipeline runs: the launch and the
prediction over (the profile's run + the model's optimizer and dp_sync terms), per layout and by world size.

    PYTHONPATH=. python docs/probes/20261206h/profile_run_matches.py > docs/probes/20261206h/profile_run_matches.txt
"""
import sys, math, statistics as st, collections
sys.path.insert(0,'docs/probes/20261205d')
from retro import load_runs, refitted_problem, stored_workloads
from autoplan.plan.api import estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
by=collections.defaultdict(list)
for wl in stored_workloads('/work/exp/s2*/*/w*'):
    d, once, j1, j2 = load_runs(wl)
    prof=ModelProfile.load(wl+"/model.json")
    W=d["workload"]["world"]
    pb=None
    for t in prof.pipeline_timings:
        if t.world!=W: continue
        dp=W//t.pp
        for k,r in once.items():
            L=Layout.from_dict(r["layout"])
            if (L.pp,L.vp,L.dp,L.tp,L.mbs,L.num_microbatches)==(t.pp,t.vp,dp,1,t.mbs,t.num_microbatches) and L.recompute=="none" and L.zero==0 and (L.schedule==t.schedule or (t.vp>1)):
                pb = pb or refitted_problem(wl, d)
                pr=estimate_problem(pb,L)[1]; bd=pr.breakdown_s
                extra=bd.get("optimizer",0)+bd.get("dp_sync",0)
                meas=r["measured"]["step_time_s"]
                x=math.log(meas/(t.step_s+extra)); y=math.log(pr.step_time_s/(t.step_s+extra))
                by[W].append((x,y))
                print(f"{wl[-20:]} W{W} {k:45s} run {t.step_s:.3f} +opt/sync {extra:.3f} once {meas:.3f} {x:+.3f}  pred {pr.step_time_s:.3f} {y:+.3f}", {a:round(b,3) for a,b in bd.items() if b})
for W in sorted(by): print(W, len(by[W]), f"once/(run+opt+sync) {st.mean(a for a,_ in by[W]):+.3f}  pred/(run+opt+sync) {st.mean(b for _,b in by[W]):+.3f}")
