"""The level of every stored fidelity workload: the mean log(measured / predicted) of its once-measured layouts, with
the fastest layout's time and the shape; then per world size the mean level and its correlation with the model's
size (the log of the fastest time).

    PYTHONPATH=. python docs/probes/20261206h/level.py > docs/probes/20261206h/level.txt
"""
import math
import os
import statistics as st
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import log_residuals, stored_workloads   # noqa: E402

rows = []
for wl in stored_workloads("/work/exp/s2*/*/w*"):
    d, res = log_residuals(wl)
    sh = d["workload"]["shape"]
    fastest = min(math.exp(x) * pr.step_time_s for _, x, pr in res)     # the fastest measured step
    rows.append((wl, d["workload"]["world"], st.mean(x for _, x, _ in res), fastest, sh.get("hidden") or sh.get("d_model"),
                 sh.get("num_layers") or sh.get("layers"), d["workload"]["global_batch"], sh.get("seq_len")))
for r in rows:
    print(f"{r[0][-20:]:20s} W{r[1]} level {r[2]:+.3f} fastest {r[3]:.3f}s  h{r[4]} L{r[5]} gb{r[6]} seq{r[7]}")
for W in (2, 3, 4):
    x = [math.log(r[3]) for r in rows if r[1] == W]
    y = [r[2] for r in rows if r[1] == W]
    if len(x) > 2:
        print(W, len(x), "corr(level, log fastest) %.2f" % np.corrcoef(x, y)[0, 1], "mean level %+.3f" % st.mean(y))
