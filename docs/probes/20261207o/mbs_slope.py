"""Within each stored workload (first in-turn job): the slope of log(pred/meas) on log2(mbs) among pipelines, and
the 1F1B-minus-interleaved offset at equal mbs.  Is a trend common to workloads or a few workloads' noise?"""
import glob, json, math, statistics as st, sys
KEY = sys.argv[1] if len(sys.argv) > 1 else "confirmed"
from collections import defaultdict
seen=set(); slopes=[]; offs=[]; dpoff=[]
for p in sorted(glob.glob("docs/probes/20261207o/stored/*/runs.json")) + sorted(glob.glob("docs/probes/**/*runs*.json", recursive=True)):
    d = json.load(open(p))
    if not isinstance(d, dict) or not d.get(KEY): continue
    sig = json.dumps(d["runs"], sort_keys=True)
    if sig in seen: continue
    seen.add(sig)
    conf = [r for r in d[KEY] if r.get("measured")]
    e = {i: math.log(r["predicted"]["step_time_s"] / r["measured"]["step_time_s"]) for i, r in enumerate(conf)}
    pp = [(math.log2(r["layout"]["mbs"]), e[i], r["layout"]) for i, r in enumerate(conf) if r["layout"]["pp"] > 1]
    xs = [a for a, _, _ in pp]
    if len(set(xs)) >= 2:
        mx, my = st.mean(xs), st.mean(b for _, b, _ in pp)
        sxx = sum((a - mx) ** 2 for a in xs)
        slopes.append(sum((a - mx) * (b - my) for a, b, _ in pp) / sxx)
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
