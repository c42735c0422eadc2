"""Pre-registered paired judge of ``profile model --group-jobs 3`` (the in-group figures the median of three
separate jobs) against one job, on the same measured layouts.

    python docs/probes/20261206f/jobs.py '/work/exp/s23/d2026125*/w*'

Each workload directory holds ``model-job1.json`` .. ``model-job3.json`` (each job's profile alone, job 1's
being what ``--group-jobs 1`` writes) and ``model.json`` (the median of the three, what the harness solved and
validated with), written by ``benchmarks/fidelity.py --group-jobs 3``. For each profile: the model's pick
among the measured layouts (the predicted fastest), its miss on both in-turn jobs pooled and on the first
in-turn job alone, and the mean abs. error over the layouts measured once (``../20261205d/retro.py``'s rules).
Then, per layout, the sd over the single-job profiles of its log prediction less the profile's mean (a
profile's own noise, job to job), and how far the median profile's lies from the single jobs' mean."""
import glob
import math
import os
import statistics as st
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import judge_workload, load_runs, problem   # noqa: E402

from autoplan.plan.api import estimate_problem   # noqa: E402
from autoplan.plan.plan import Layout   # noqa: E402

ARMS = ("model-job1.json", "model-job2.json", "model-job3.json", "model.json")
tally = {a: [0, 0, [], []] for a in ARMS}        # within 5% pooled, within 5% job 1, misses, errors
noise, gap = [], []
wls = sorted(w for a in sys.argv[1:] for w in glob.glob(a) if os.path.exists(f"{w}/runs.json")
             and all(os.path.exists(f"{w}/{x}") for x in ARMS))
for wl in wls:
    name = "/".join(wl.split("/")[-2:])
    line = []
    for arm in ARMS:
        _, ch, miss, m1, err = judge_workload(wl, refit=False, model_path=f"{wl}/{arm}")
        t = tally[arm]
        t[0] += miss <= 0.05
        t[1] += m1 <= 0.05
        t[2].append(miss)
        t[3].append(err)
        line.append(f"{arm[:-5]:10s} {miss:+6.1%} / {m1:+6.1%}  err {err:5.1%}  {ch}")
    d, once, _, _ = load_runs(wl)
    logs = {}
    for arm in ARMS:
        pb = problem(wl, d, f"{wl}/{arm}")
        x = {k: math.log(estimate_problem(pb, Layout.from_dict(r["layout"]))[1].step_time_s) for k, r in once.items()}
        mu = st.mean(x.values())
        logs[arm] = {k: v - mu for k, v in x.items()}
    sds = [st.stdev([logs[a][k] for a in ARMS[:3]]) for k in once]
    gaps = [abs(logs["model.json"][k] - st.mean(logs[a][k] for a in ARMS[:3])) for k in once]
    noise.append(st.median(sds))
    gap.append(st.median(gaps))
    print(f"== {name}: per layout, sd over the three jobs {st.median(sds):.3f} (median), "
          f"median profile off their mean by {st.median(gaps):.3f}")
    for s in line:
        print("   " + s)
print(f"\n{len(wls)} workloads; pick within 5% of the fastest on both in-turn jobs pooled / on job 1, mean miss, "
      "mean abs. error of the layouts measured once:")
for arm in ARMS:
    t = tally[arm]
    print(f"  {arm:16s} {t[0]:2d} / {t[1]:2d}   miss {st.mean(t[2]):+.1%}   error {st.mean(t[3]):.1%}")
single = [tally[a] for a in ARMS[:3]]
print(f"  single jobs, mean: {st.mean(t[0] for t in single):.1f} / {st.mean(t[1] for t in single):.1f}   "
      f"miss {st.mean(st.mean(t[2]) for t in single):+.1%}   error {st.mean(st.mean(t[3]) for t in single):.1%}")
print(f"profile noise job to job (median over workloads of the per-layout sd): {st.median(noise):.3f}")
