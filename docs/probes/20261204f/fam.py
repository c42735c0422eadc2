"""Predicted / measured step time by layout family, over the layouts timed in turn in one job (``confirmed`` in a
fidelity workdir's runs.json): ``python fam.py "/work/exp/s6/d*/w*/runs.json"``.  Per workload: the pipelines'
median ratio over the data-parallel layouts' (1: no bias between the families within one job)."""
import json,sys,glob,statistics as st
rows=[]
for f in sorted(glob.glob(sys.argv[1])):
    d=json.load(open(f))
    for r in d["confirmed"]:
        m=r["measured"]
        if not m or not m.get("in_turn_s"): continue
        L=r["layout"]; fam=("pp%d"%L["pp"]+("vp" if L.get("vp",1)>1 or L.get("schedule")=="interleaved" else "")) if L["pp"]>1 else ("tp" if L["tp"]>1 else "dp")
        rows.append(("/".join(f.split("/")[-3:-1]),fam,r["predicted"]["step_time_s"]/m["step_time_s"]))
by={}
for w,fam,x in rows: by.setdefault(fam,[]).append(x)
for k,v in sorted(by.items()): print(k,len(v),"median pred/meas %.3f"%st.median(v), "range %.2f-%.2f"%(min(v),max(v)))
# within-workload: pipeline ratio over dp ratio
for w in sorted({r[0] for r in rows}):
    dp=[x for ww,f,x in rows if ww==w and f=="dp"]; pp=[x for ww,f,x in rows if ww==w and f.startswith("pp")]
    if dp and pp: print(w, "pp/dp ratio-of-ratios %.3f"%(st.median(pp)/st.median(dp)), len(dp), len(pp))
