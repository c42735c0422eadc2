"""Per-layout residual (log predicted/measured minus workload median) against layout features; and the judge's own
noise (first vs second in-turn job)."""
import json, math, statistics as st
from collections import defaultdict
from common import stored
pts = []; mnoise = []
for p, d in stored("confirmed"):
    conf = [r for r in d["confirmed"] if r.get("measured")]
    if len(conf) < 4: continue
    e = [math.log(r["predicted"]["step_time_s"] / r["measured"]["step_time_s"]) for r in conf]
    m = st.median(e)
    w = d.get("workload", {})
    for r, x in zip(conf, e):
        L = r["layout"]
        pts.append((x - m, L, w, r))
    if d.get("judged"):
        jm = {json.dumps(r["layout"], sort_keys=True): r["measured"]["step_time_s"] for r in d["judged"] if r.get("measured")}
        v = [math.log(r["measured"]["step_time_s"] / jm[k]) for r in conf if (k := json.dumps(r["layout"], sort_keys=True)) in jm]
        if len(v) > 3:
            mv = st.median(v); mnoise += [x - mv for x in v]
print(len(pts), "points; resid sd", round(st.pstdev([p[0] for p in pts]), 4), "; job1 vs job2 measured sd", round(st.pstdev(mnoise), 4), "n", len(mnoise))
print("example layout keys", sorted(pts[0][1].keys()))
def feat(L, w):
    pp, vp, dp, tp = L.get("pp", 1), L.get("vp", 1), L.get("dp", 1), L.get("tp", 1)
    mbs = L.get("micro_batch_size") or L.get("mbs")
    gb = w.get("global_batch")
    nmb = gb // (dp * mbs) if gb and mbs else None
    return dict(fam="pp" if pp > 1 else "tp" if tp > 1 else "dp", pp=pp, vp=vp, dp=dp, tp=tp, mbs=mbs, nmb=nmb,
                zero=L.get("zero_stage", L.get("zero")), rc=str(L.get("recompute")), sched=L.get("schedule"), world=w.get("world"))
g = defaultdict(list)
for x, L, w, r in pts:
    f = feat(L, w)
    for k in ("fam", "pp", "vp", "mbs", "nmb", "zero", "rc", "sched", "world"):
        g[(k, f[k])].append(x)
    g[("fam/mbs", (f["fam"], f["mbs"]))].append(x)
    g[("fam/nmb", (f["fam"], f["nmb"]))].append(x)
    g[("pp/vp", (f["pp"], f["vp"]))].append(x)
for k, v in sorted(g.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
    if len(v) >= 4:
        print(f"{k[0]:8s} {str(k[1]):18s} n{len(v):4d} median {100*st.median(v):+5.1f}% mean {100*st.mean(v):+5.1f}% sd {100*st.pstdev(v):4.1f}")
