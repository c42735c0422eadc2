"""Probes 20261207j background (exploratory, stored runs): every stored workload whose model choice misses the fastest
of the pooled in-turn medians by more than 5%, each measured layout with its prediction (refitted current cost code),
both jobs' medians and log(pooled / predicted).

    PYTHONPATH=. python docs/probes/20261207j/misses.py > docs/probes/20261207j/misses.txt
"""
import math
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import load_runs, pooled, refitted_problem, stored_workloads
from autoplan.plan.api import estimate_problem
from autoplan.plan.plan import Layout
import collections
cnt=collections.Counter()
for wl in sorted(stored_workloads("/work/exp/s2*/d*/w*"))+sorted(stored_workloads("/work/exp/s23/shape*/w*")):
    d, once, j1, j2 = load_runs(wl)
    pool = pooled(j1, j2)
    pb = refitted_problem(wl, d, True, None)
    pred={k: estimate_problem(pb, Layout.from_dict(r["layout"]))[1].step_time_s for k,r in once.items()}
    ch=min(pred,key=pred.get)
    if ch not in pool: continue
    fast=min(pool,key=pool.get)
    miss=pool[ch]/pool[fast]-1
    if miss>0.05:
        print(f"{wl[10:]:24s} w={d['workload']['world']} miss {miss:+.1%}")
        for k in sorted(pool,key=pool.get):
            print(f"     {'C' if k==ch else ' '} {k:60s} pred {pred[k]:.3f} pooled {pool[k]:.3f} j1 {j1.get(k,float('nan')):.3f} j2 {j2.get(k,float('nan')):.3f}  resid {math.log(pool[k]/pred[k]):+.3f}")
