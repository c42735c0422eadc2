import json, glob, os
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
out = {}
for wd in sorted(glob.glob("f2[0-3]/w*") + glob.glob("ddp/*.json")):
    if wd.endswith(".json"):
        wl = "/work/exp/" + os.path.basename(wd)[:-5].replace("_", "/", 1); prof = wd
    else:
        wl, prof = wd, f"{wd}/model.json"
    if not os.path.exists(f"{wl}/runs.json"): continue
    d = json.load(open(f"{wl}/runs.json"))
    pb = make_problem(prof, f"{wl}/cluster.json", d["workload"]["global_batch"], memory_per_device_bytes=2**30)
    for r in d["runs"]:
        L = Layout.from_dict(r["layout"])
        out[f"{wd} {L.short()}"] = estimate_problem(pb, L)[1].step_time_s
json.dump(out, open(os.environ["OUT"], "w"))
print(len(out))
