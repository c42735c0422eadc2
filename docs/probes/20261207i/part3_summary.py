"""Probes 20261207i part 3 and 3b: the results of part3_jobs.sh (E1-E4: a fresh group job's pp4 runs),
part3_launches.py (E5) and part3b_launches.py (E6), in ms (medians; a group job's runs: the slowest rank's).

    python docs/probes/20261207i/part3_summary.py /work/exp/s25/p3 > docs/probes/20261207i/part3.txt
"""
import glob
import json
import os
import statistics as st
import sys

d = sys.argv[1]
for name, what in (("E1", "mbs 4, references"), ("E2", "mbs 4, no references"), ("E3", "mbs 1, references"),
                   ("E4", "mbs 1, no references")):
    runs = json.load(open(f"{d}/{name}.json"))["runs"]
    print(f"{name} group job, pp4 1F1B, stages (3, 2, 3, 2), {what}: "
          + ", ".join(f"m {m} {s * 1e3:.0f} ms" for _, m, s in runs))
for path in sorted(glob.glob(f"{d}/E[56]_*.json")):
    if path.endswith("_plan.json"):
        continue
    plan = json.load(open(path[:-5] + "_plan.json"))
    sizes = tuple(len(s) for s in plan["layout"]["stages"])
    med = {k: round(st.median(v) * 1e3) for k, v in json.load(open(path)).items()}
    print(f"{os.path.basename(path)[:-5]} launch, stages {sizes}: {med}")
