"""Exploratory (README part 2): the stored predictions' signed log error of pipelines by micro-batch size and of pure data parallel, judged on the first in-turn job and on the single launches."""
import math, statistics as st, sys
from collections import defaultdict
sys.path.insert(0, "docs/probes/20261207o")
from common import stored
for key in ("confirmed", "runs"):
    by = defaultdict(list); dp = []
    for p, d in stored(key):
        for r in d[key]:
            if not r.get("measured"): continue
            L = r["layout"]; e = math.log(r["predicted"]["step_time_s"] / r["measured"]["step_time_s"])
            if L["pp"] > 1: by[L["mbs"]].append(e)
            elif L.get("tp", 1) == 1 and L["zero"] == 0: dp.append(e)
    print(key, {m: (len(v), f"{100*st.median(v):+.1f}%") for m, v in sorted(by.items())}, "dp z0:", len(dp), f"{100*st.median(dp):+.1f}%")
