"""Exploratory: summarise pinned.sh (per plan: median per job, the spread of those medians across jobs, IQR within)."""
import json
import statistics
from pathlib import Path

O = Path("/work/exp/s27/pinned")
names = [json.loads(Path(f"/work/exp/s27/shapes3/160x8/w0/plan-in-turn-{i}.json").read_text())["layout"]
         for i in range(4)]
for mode in ("free", "pin"):
    jobs = [json.loads((O / f"{mode}{k}.json").read_text())["step_times_s"] for k in (1, 2, 3)]
    print(f"== {mode}")
    for i, lay in enumerate(names):
        meds = [statistics.median(j[i]) for j in jobs]
        iqrs = []
        for j in jobs:
            q1, q2, q3 = statistics.quantiles(j[i], n=4)
            iqrs.append((q3 - q1) / q2)
        short = f"dp{lay['dp']} pp{lay['pp']} vp{lay.get('vp', 1)} mbs{lay['mbs']}x{lay['num_microbatches']} {lay['schedule']}"
        print(f"  {short:32s} medians {', '.join(f'{m * 1e3:.0f}' for m in meds)} ms  (max/min {max(meds) / min(meds):.3f})"
              f"  IQR/median {', '.join(f'{x:.0%}' for x in iqrs)}")
