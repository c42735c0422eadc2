"""Exploratory (README part 3): the data-parallel layouts' error about their workload's median (in turn, single) with their predicted breakdown."""
import json, math, statistics as st, sys
sys.path.insert(0, "docs/probes/20261207o")
from common import stored
for p, d in stored("confirmed"):
    single = {json.dumps(r["layout"], sort_keys=True): r for r in d["runs"] if r.get("measured")}
    conf = [r for r in d["confirmed"] if r.get("measured")]
    errs = [math.log(r["predicted"]["step_time_s"]/r["measured"]["step_time_s"]) for r in conf]
    med = st.median(errs)
    for r, e in zip(conf, errs):
        L = r["layout"]
        if L["pp"] == 1:
            k = json.dumps(L, sort_keys=True)
            s = single.get(k)
            es = math.log(s["predicted"]["step_time_s"]/s["measured"]["step_time_s"]) if s else float('nan')
            bd = r["predicted"]["breakdown_s"]
            tot = r["predicted"]["step_time_s"]
            print(f"{p.split('/')[-2][:22]:22s} w{d['workload']['world']} dp{L['dp']} tp{L['tp']} z{L['zero']} mbs{L['mbs']}x{L['num_microbatches']} in-turn err-med {e-med:+.3f} single {es:+.3f} pred {tot:.3f} " + " ".join(f"{k}={v/tot:.2f}" for k, v in bd.items() if v/tot > 0.01))
