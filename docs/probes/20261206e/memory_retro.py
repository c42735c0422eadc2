"""Every measured run of the stored fidelity workloads re-predicted by the cost model on the path
(PYTHONPATH): predicted / measured peak memory - 1, by family, and the worst under-prediction.

    PYTHONPATH=<tree> python docs/probes/20261206e/memory_retro.py '/work/exp/s2*/d*/w*'"""
import collections
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "20261205d"))
from retro import problem, stored_workloads   # noqa: E402

from autoplan.plan.api import estimate_problem   # noqa: E402
from autoplan.plan.plan import Layout   # noqa: E402

fam = collections.defaultdict(list)
for wl in sorted(w for a in sys.argv[1:] for w in stored_workloads(a)):
    d = json.load(open(f"{wl}/runs.json"))
    pb = problem(wl, d)
    for r in d["runs"]:
        L = Layout.from_dict(r["layout"])
        pred = estimate_problem(pb, L)[1].peak_memory_bytes
        err = pred / r["measured"]["peak_memory_bytes"] - 1
        wrapper = "ddp" if L.zero == 0 and L.tp == 1 and L.pp == 1 else f"fsdp-z{L.zero}"
        key = (wrapper, "pp" if L.pp > 1 else "no pp", "m>1" if L.num_microbatches > 1 else "m=1",
               "recompute" if L.recompute != "none" or L.recompute_layers else "")
        fam[key].append((err, f"{wl.split('/')[-2][-2:]}{wl.split('/')[-1]} {L.short()}"))
allv = [x for v in fam.values() for x in v]
for k, v in sorted(fam.items()):
    e = [x[0] for x in v]
    print(f"{' '.join(k):32s} {len(v):3d} runs: mean {sum(e) / len(e):+6.1%}  min {min(e):+6.1%}  max {max(e):+6.1%}")
e = [x[0] for x in allv]
print(f"all {len(e)} runs: mean {sum(e) / len(e):+.1%}, mean abs {sum(map(abs, e)) / len(e):.1%}; "
      f"under-predicted by more than 10%: {sum(x < -0.10 for x in e)}; worst {min(allv)[0]:+.1%} ({min(allv)[1]})")
