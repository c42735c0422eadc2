"""Exploratory (README part 5): each validated pipeline layout that the profile also ran (same pp, vp, schedule,
micro-batches and size; chunks possibly split otherwise): the profile's own step, the model's prediction, and the
layout's step as validate measured it (single launch) and in the first in-turn job. Is the gap the model's or the
run's?"""
import json, math, statistics as st, sys
from pathlib import Path
sys.path.insert(0, "docs/probes/20261207o")
from autoplan.profile.formats import ModelProfile
from common import stored

rows = []
for p, d in stored("confirmed"):
    w = Path(p).parent
    if not (w / "model.json").exists():
        continue
    prof = ModelProfile.load(str(w / "model.json"))
    single = {json.dumps(r["layout"], sort_keys=True): r for r in d["runs"] if r.get("measured")}
    for r in d["confirmed"]:
        L = r["layout"]
        if L["pp"] < 2 or not r.get("measured"):
            continue
        same = [t for t in prof.pipeline_timings if (t.pp, t.vp, t.schedule, t.num_microbatches, t.mbs) ==
                (L["pp"], L["vp"], L["schedule"], L["num_microbatches"], L["mbs"])]
        s = single.get(json.dumps(L, sort_keys=True))
        if not same or s is None:
            continue
        t = same[0]
        pr, it, sg = r["predicted"]["step_time_s"], r["measured"]["step_time_s"], s["measured"]["step_time_s"]
        split_alike = tuple(len(x) for x in L["stages"]) == tuple(t.chunks)
        rows.append((math.log(pr / t.step_s), math.log(sg / t.step_s), math.log(it / t.step_s), split_alike))
        print(f"{w.name:24s} pp{L['pp']} vp{L['vp']} {L['schedule'][:4]} {L['mbs']}x{L['num_microbatches']:<2d} "
              f"chunks {'alike ' if split_alike else 'differ'} profile run {t.step_s:.3f}  predicted {pr/t.step_s-1:+6.1%}"
              f"  single launch {sg/t.step_s-1:+6.1%}  in turn {it/t.step_s-1:+6.1%}")
for name, sel in (("all", lambda r: True), ("chunks alike", lambda r: r[3])):
    v = [r for r in rows if sel(r)]
    if v:
        print(f"{name}: {len(v)} layouts; over the profile's own run, median: predicted {100*st.median(r[0] for r in v):+.1f}%, "
              f"single launch {100*st.median(r[1] for r in v):+.1f}%, in turn {100*st.median(r[2] for r in v):+.1f}%")
