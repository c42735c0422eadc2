"""Same shape, same layout, measured in several runs: is a layout's residual (log pred/meas minus the workload's
median) repeatable (a systematic model error) or not (noise)?"""
import glob, json, math, statistics as st
from collections import defaultdict
by = defaultdict(lambda: defaultdict(list))
for p in sorted(glob.glob("docs/probes/20261207o/stored/*/runs.json")):
    d = json.load(open(p))
    conf = [r for r in d.get("confirmed") or [] if r.get("measured")]
    if len(conf) < 4: continue
    w = d["workload"]; key = (w["shape"]["name"], w["global_batch"], w["world"])
    e = [math.log(r["predicted"]["step_time_s"] / r["measured"]["step_time_s"]) for r in conf]
    m = st.median(e)
    for r, x in zip(conf, e):
        L = r["layout"]
        lk = f"dp{L['dp']} pp{L['pp']} vp{L['vp']} mbs{L['mbs']} {L['schedule']} st{L.get('stages')}"
        by[key][lk].append((round(100 * (x - m), 1), p.split('/')[3:5]))
for key, lays in by.items():
    reps = {k: v for k, v in lays.items() if len(v) >= 2}
    if not reps: continue
    print(key)
    within, between = [], []
    for k, v in sorted(reps.items()):
        xs = [a for a, _ in v]
        print(f"   {k:60s} {xs}")
        mu = st.mean(xs); within += [x - mu for x in xs]; between.append(mu)
    print(f"   within-layout sd {st.pstdev(within):.1f}%  sd of layout means {st.pstdev(between):.1f}%")
