"""How much of the model's per-layout error is the judge's own noise: the same layouts timed in two in-turn jobs
(job 1 = confirmed, job 2 = judged), log(job1/job2) centred per workload; and whether job 1's fastest is within 5%
of job 2's. Over the stored workloads.

    python docs/probes/20261205e/noise.py
"""
import sys, math, statistics as st
import os
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '20261205d'))
import retro
xs=[]; gaps=[]
for wl in retro.stored_workloads('/work/exp/s1*/d*/w*'):
    d, once, j1, j2 = retro.load_runs(wl)
    both=[k for k in j1 if k in j2]
    if len(both)<2: continue
    l=[math.log(j1[k]/j2[k]) for k in both]; c=st.mean(l)
    xs += [v-c for v in l]
    # is the job1-fastest also job2 within 5%?
    b1=min(both,key=j1.get); gaps.append(j2[b1]/min(j2[k] for k in both)-1)
print("n", len(xs), "sd log(j1/j2) centred", round(st.pstdev(xs),3), "=> per-job sd", round(st.pstdev(xs)/math.sqrt(2),3))
print("job1's fastest on job2: within5", sum(g<=0.05 for g in gaps), "of", len(gaps), "max", round(max(gaps),3))
