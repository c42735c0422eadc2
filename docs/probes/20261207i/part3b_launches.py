import json, subprocess, statistics as st
from autoplan.execute.launch import torchrun_command
W = "docs/probes/20261206h/phases_worker.py"
names = ["embed"] + [f"block.{i}" for i in range(8)] + ["head"]
def stages(sizes):
    out, i = [], 0
    for s in sizes:
        out.append(names[i:i + s]); i += s
    return out
res = {}
for rep in range(2):
    for src, tag in (("plan4.json", "mbs4x4"), ("plan0.json", "mbs1x16")):
        for sizes in ((2, 3, 3, 2), (3, 2, 3, 2)):
            p = json.load(open(f"/work/exp/s25/p1/launch/{src}"))
            p["layout"]["stages"] = stages(sizes)
            name = f"E6_{tag}_{''.join(map(str, sizes))}_{rep}"
            path = f"/work/exp/s25/p3/{name}_plan.json"
            json.dump(p, open(path, "w"))
            out = f"/work/exp/s25/p3/{name}.json"
            r = subprocess.run(torchrun_command(path, W, ["--out", out, "--rounds", "8"]), capture_output=True, text=True, timeout=900)
            if r.returncode:
                print(name, "failed", r.stderr[-800:]); continue
            d = {k: round(st.median(v) * 1e3) for k, v in json.load(open(out)).items()}
            print(name, d, flush=True)
