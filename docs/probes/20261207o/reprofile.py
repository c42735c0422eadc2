"""Exploratory (in-sample on stored workloads): profile a stored fidelity workload again with this code (pipelines at
two micro-batch sizes), keep the stored cluster profile and the stored in-turn measurements, and write the new
profile beside a copy.  Usage: PYTHONPATH=. python reprofile.py STORED_DIR OUT_DIR"""
import json, shutil, sys, time
from pathlib import Path
sys.path.insert(0, "benchmarks")
from fidelity import Workload, profile_jobs_apart
src, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
runs = json.load(open(src / "runs.json"))
w = runs["workload"]
wl = Workload(w["shape"], w["global_batch"], w["world"])
for f in ("shape.json", "cluster.json", "runs.json"):
    shutil.copy(src / f, out / f)
t0 = time.time()
profile_jobs_apart(out / "shape.json", out / "model.json", ",".join(map(str, wl.profiled_mbs())), wl.world, 3)
print(f"{src}: profiled in {time.time() - t0:.0f} s", flush=True)
