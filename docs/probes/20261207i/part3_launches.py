import json, subprocess, statistics as st
from autoplan.execute.launch import torchrun_command
W = "docs/probes/20261206h/phases_worker.py"
st_ = [["embed", "block.0", "block.1"], ["block.2", "block.3"], ["block.4", "block.5", "block.6"], ["block.7", "head"]]
for src, name in (("plan4.json", "E5_mbs4x4"), ("plan0.json", "E5_mbs1x16")):
    p = json.load(open(f"/work/exp/s25/p1/launch/{src}"))
    p["layout"]["stages"] = st_
    path = f"/work/exp/s25/p3/{name}_plan.json"
    json.dump(p, open(path, "w"))
    out = f"/work/exp/s25/p3/{name}.json"
    r = subprocess.run(torchrun_command(path, W, ["--out", out]), capture_output=True, text=True, timeout=900)
    if r.returncode:
        print(name, "failed", r.stderr[-1500:]); continue
    d = json.load(open(out))
    print(name, {k: round(st.median(v) * 1e3) for k, v in d.items()}, flush=True)
