"""Is a fidelity miss the draw of one profile?  For a stored fidelity workload directory (shape.json,
model.json, cluster.json, runs.json), profile the model afresh K times exactly as fidelity.py does, predict
the stored top-10 layouts (their stages as stored) from each profile, and print each profile's pick among
the layouts timed in turn against the medians of the two stored in-turn jobs; also the pick of the
per-layout median of the predictions over all profiles (the stored one and the fresh ones).

usage: python reprofile.py WORKDIR K OUTDIR
"""
import json
import statistics
import subprocess
import sys
from pathlib import Path

from autoplan.plan.api import make_problem
from autoplan.plan.cost import evaluate
from autoplan.plan.plan import Layout

work, k, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
out.mkdir(parents=True, exist_ok=True)
d = json.loads((work / "runs.json").read_text())
w = d["workload"]
world, gb = w["world"], w["global_batch"]
sizes = sorted({1, 2, 4} | ({gb // world} if gb % world == 0 else set()))


def medians(key):
    got = {}
    for r in d.get(key) or []:
        m = r.get("measured") or {}
        if m.get("in_turn_s"):
            got[json.dumps(r["layout"], sort_keys=True)] = statistics.median(m["in_turn_s"])
    return got


job1, job2 = medians("confirmed"), medians("judged")
layouts = [r["layout"] for r in d["runs"]]
keys = [json.dumps(x, sort_keys=True) for x in layouts]
profiles = [work / "model.json"]
for i in range(k):
    p = out / f"model{i}.json"
    if not p.exists():
        subprocess.run([sys.executable, "-m", "autoplan.cli", "profile", "model", "--model", str(work / "shape.json"),
                        "--out", str(p), "--mbs", ",".join(map(str, sizes)), "--nproc", str(world)],
                       check=True, capture_output=True)
    profiles.append(p)
preds = []
for p in profiles:
    pb = make_problem(str(p), str(work / "cluster.json"), gb)
    preds.append([evaluate(pb.profile, pb.cluster, Layout.from_dict(x), pb.train).step_time_s for x in layouts])


def judge(pred, job):
    timed = [i for i, key in enumerate(keys) if key in job]
    if not timed:
        return "n/a"
    pick = min(timed, key=lambda i: pred[i])
    best = min(job[keys[i]] for i in timed)
    return f"{job[keys[pick]] / best - 1:+.1%}"


names = [Layout.from_dict(x).short() for x in layouts]
print(f"{w['shape']['name']} on {world} processes, batch {gb}")
for name, i in zip(names, range(len(layouts))):
    row = " ".join(f"{p[i]:.3f}" for p in preds)
    print(f"  {name:58s} pred {row}  job1 {job1.get(keys[i], float('nan')):.3f} job2 {job2.get(keys[i], float('nan')):.3f}")
for j, (p, pred) in enumerate(zip(profiles, preds)):
    print(f"  profile {p.name if j else 'stored'}: pick among those timed in turn, against job1 {judge(pred, job1)}, job2 {judge(pred, job2)}")
med = [statistics.median(p[i] for p in preds) for i in range(len(layouts))]
print(f"  median of the {len(preds)} profiles' predictions: job1 {judge(med, job1)}, job2 {judge(med, job2)}")
fresh = [statistics.median(p[i] for p in preds[1:]) for i in range(len(layouts))]
print(f"  median of the {len(preds) - 1} fresh profiles' predictions: job1 {judge(fresh, job1)}, job2 {judge(fresh, job2)}")
