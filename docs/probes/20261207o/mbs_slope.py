"""Within each stored workload (first in-turn job): the slope of log(pred/meas) on log2(mbs) among pipelines, and
the 1F1B-minus-interleaved offset at equal mbs.  Is a trend common to workloads or a few workloads' noise?"""
import math, statistics as st, sys
from collections import defaultdict
from common import slope, stored
KEY = sys.argv[1] if len(sys.argv) > 1 else "confirmed"
slopes=[]; offs=[]; dpoff=[]
for p, d in stored(KEY):
    conf = [r for r in d[KEY] if r.get("measured")]
    e = {i: math.log(r["predicted"]["step_time_s"] / r["measured"]["step_time_s"]) for i, r in enumerate(conf)}
    pp = [(math.log2(r["layout"]["mbs"]), e[i], r["layout"]) for i, r in enumerate(conf) if r["layout"]["pp"] > 1]
    k = slope([(a, b) for a, b, _ in pp])
    if k is not None:
        slopes.append(k)
    g = defaultdict(lambda: defaultdict(list))
    for a, b, L in pp:
        g[L["mbs"]][L["schedule"]].append(b)
    for m, s in g.items():
        if "1f1b" in s and "interleaved" in s:
            offs.append(st.mean(s["1f1b"]) - st.mean(s["interleaved"]))
    dps = [e[i] for i, r in enumerate(conf) if r["layout"]["pp"] == 1]
    pps = [e[i] for i, r in enumerate(conf) if r["layout"]["pp"] > 1]
    if dps and pps:
        dpoff.append(st.mean(dps) - st.median(pps))
def show(name, v):
    v = sorted(v)
    print(f"{name}: n {len(v)}, median {st.median(v):+.3f}, >0 in {sum(x > 0 for x in v)}, quartiles {[round(q,3) for q in st.quantiles(v, n=4)]}")
show("slope of log error per doubling of mbs (pipelines)", slopes)
show("1F1B minus interleaved at equal mbs (log error)", offs)
show("data parallel minus pipelines' median (log error)", dpoff)
