"""Exploratory (README part 1): the layers' in-group time over their time alone by micro-batch size, and each profile's fitted pipeline terms (pp, slowdown, idle_share, per-chunk ms, interleaved ms, per-step ms, fit error)."""
import glob, json, warnings
from pathlib import Path
warnings.simplefilter("ignore")
from autoplan.profile.formats import ModelProfile
from autoplan.plan.pipeline_costs import _unit_times, _slowdown
for d in sorted(glob.glob("docs/probes/20261207o/stored/*/model.json")):
    prof = ModelProfile.from_dict(json.load(open(d)))
    worlds = sorted({c.world for c in prof.pipeline_costs})
    for w in worlds:
        mbss = sorted({t.mbs for k in prof.kinds.values() for t in k.timings})
        out=[]
        for m in mbss:
            u = _unit_times(prof, w, m)
            if u is None: continue
            out.append(f"mbs{m}: s={_slowdown(prof,w,m,u):.2f}")
        pc = [ (c.pp, c.slowdown, c.idle_share, round(c.per_chunk_s*1e3,2), round(c.per_chunk_interleaved_s*1e3,2), round(c.per_step_s*1e3,1), c.fit_error) for c in prof.pipeline_costs if c.world==w]
        print(Path(d).parent.name, "w", w, " ".join(out), pc)
