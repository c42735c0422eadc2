"""Two plans' step times from an `autoplan.execute.measure` in-turn JSON: `python ratio.py OUT.json A B`."""
import json,sys,statistics as st
d=json.load(open(sys.argv[1]))["step_times_s"]
a,b=int(sys.argv[2]),int(sys.argv[3])
print(f"plan {a}: median {st.median(d[a])*1e3:.1f} ms, plan {b}: {st.median(d[b])*1e3:.1f} ms, ratio of medians {st.median(d[a])/st.median(d[b]):.3f}, median of per-round ratios {st.median(x/y for x,y in zip(d[a],d[b])):.3f}")
