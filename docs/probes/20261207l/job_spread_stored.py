"""The job spread (max / min - 1 over a profile's three separate jobs) of the same whole steps: the whole model's
(its seconds summed) and each pipeline run's step_s, from fidelity.py's model-job{1,2,3}.json. Pure JSON."""
import json
import statistics
import sys
from pathlib import Path

for wd in sys.argv[1:]:
    files = [Path(wd) / f"model-job{j}.json" if Path(wd).is_dir() else Path(f"{wd}_job{j}.json") for j in (1, 2, 3)]
    jobs = [json.load(open(f)) for f in files]
    cases = {}
    for d in jobs:
        for t in d.get("whole_model_timings", []):
            key = ("whole", t["world"], t["mbs"])
            cases.setdefault(key, []).append(sum(v for k, v in t.items() if k.endswith("_s")))
        for t in d.get("pipeline_timings", []):
            key = ("pipe", t["world"], t["pp"], t["vp"], t["schedule"], t["num_microbatches"], t["mbs"])
            cases.setdefault(key, []).append(t["step_s"])
    sp = sorted((max(v) / min(v) - 1, k) for k, v in cases.items() if len(v) >= 2)
    print(f"{wd}: {len(sp)} steps, median {statistics.median(s for s, _ in sp):.1%}, max {sp[-1][0]:.1%} {sp[-1][1]}")
