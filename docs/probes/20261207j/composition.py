"""Probes 20261207j part 3 background (exploratory, stored profiles): the composition factor f_c (whole model in
groups over the sum of its layers) at micro-batch 1, 2 and 4, per world size.

    PYTHONPATH=. python docs/probes/20261207j/composition.py > docs/probes/20261207j/composition.txt
"""
import glob, statistics as st, collections
from autoplan.profile.formats import ModelProfile
from autoplan.plan.coefficient_sources import composition_factors
by=collections.defaultdict(list)
for f in sorted(glob.glob('/work/exp/s2[0-3]/d*/w*/model.json')):
    p=ModelProfile.load(f)
    if not p.pipeline_timings: continue
    w=p.pipeline_timings[0].world
    fc={m: composition_factors(p, w, m)[0] for m in sorted({g.mbs for g in p.whole_model_timings})}
    by[w].append(fc)
for w,v in sorted(by.items()):
    print(w, len(v), "median f_c by mbs:", {m: round(st.median(x[m] for x in v if m in x),3) for m in (1,2,4)}, " f_c(4)/f_c(1) median", round(st.median(x[4]/x[1] for x in v if 4 in x and 1 in x),3), "quartiles", [round(q,3) for q in st.quantiles([x[4]/x[1] for x in v if 4 in x and 1 in x], n=4)])
