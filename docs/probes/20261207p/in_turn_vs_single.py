"""Exploratory (README part 3): each layout's in-turn step over its single launch, less its workload's median ratio, by family."""
import json, math, statistics as st, sys
sys.path.insert(0, "docs/probes/20261207o")
from common import stored
fam = lambda L: "pp" if L["pp"] > 1 else ("tp" if L.get("tp",1) > 1 else "dp")
per = {"pp": [], "dp": [], "tp": []}
wl = []
for p, d in stored("confirmed"):
    single = {json.dumps(r["layout"], sort_keys=True): r["measured"]["step_time_s"] for r in d["runs"] if r.get("measured")}
    conf = {json.dumps(r["layout"], sort_keys=True): r["measured"]["step_time_s"] for r in d["confirmed"] if r.get("measured")}
    common_ = [k for k in conf if k in single]
    if len(common_) < 3: continue
    lr = {k: math.log(conf[k] / single[k]) for k in common_}
    med = st.median(lr.values())
    g = {"pp": [], "dp": [], "tp": []}
    for k, v in lr.items():
        g[fam(json.loads(k))].append(v - med)
    for f in g: per[f] += g[f]
    if g["dp"] and g["pp"]:
        wl.append(st.mean(g["dp"]) - st.mean(g["pp"]))
    print(p.split("/")[-2][:30], "world", d["workload"]["world"], "med in-turn/single %+.3f" % med, {f: [round(x, 3) for x in v] for f, v in g.items() if v})
for f, v in per.items():
    if v: print(f, len(v), "median %+.3f" % st.median(v))
print("dp - pp per workload", sorted(round(x, 3) for x in wl))
