"""Probes 20261207i part 2 (exploratory, stored runs only): is a layout's error a function of its micro-batch size?

    PYTHONPATH=. python docs/probes/20261207i/mbs_trend.py > docs/probes/20261207i/mbs_trend.txt
    PYTHONPATH=. python docs/probes/20261207i/mbs_trend.py --in-turn > docs/probes/20261207i/mbs_trend_in_turn.txt

log(measured / predicted) of every measured layout of the stored fidelity workloads (seeds 20261250-60), centred
within its workload and family (dp, tp, pp, vp, ZeRO, recompute, cp: the layouts that differ only in the
micro-batch size and count), then averaged per (world, pipeline or not, micro-batch size). A positive figure:
measured slower than predicted, relative to the same family's other micro-batch sizes. Measured: each layout's
once-measured launch (validate's first measurement, one after another over minutes); with ``--in-turn`` the
pooled medians of the two in-turn jobs (every layout's steps interleaved, so the machine's drift over the minutes
falls on all of them alike)."""
import collections
import os
import statistics as st
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import family, in_turn_residuals, log_residuals, stored_workloads   # noqa: E402

IN_TURN = "--in-turn" in sys.argv[1:]
agg = collections.defaultdict(list)
pairs = collections.defaultdict(list)
for wl in stored_workloads("/work/exp/s2*/d*/w*"):
    d, rows = (in_turn_residuals if IN_TURN else log_residuals)(wl)
    world = d["workload"]["world"]
    fams = collections.defaultdict(list)
    for L, x, pr in rows:
        fams[family(L)].append((L, x))
    for fam, members in fams.items():
        if len({L.mbs for L, _ in members}) < 2:
            continue
        mid = st.mean(x for _, x in members)
        for L, x in members:
            agg[(world, "pipeline" if L.pp > 1 else "no pipeline", L.mbs)].append(x - mid)
        by = {L.mbs: x for L, x in members}
        lo, hi = min(by), max(by)
        pairs[(world, "pipeline" if fam[2] > 1 else "no pipeline")].append(by[hi] - by[lo])
print("measured:", "pooled in-turn medians" if IN_TURN else "once-measured launches")
for k in sorted(agg):
    v = agg[k]
    print(f"world {k[0]} {k[1]:12s} mbs {k[2]}: {len(v):3d} layouts, centred log(meas/pred) {st.mean(v):+.3f} "
          f"(sd {st.pstdev(v):.3f})")
print()
for k in sorted(pairs):
    v = pairs[k]
    print(f"world {k[0]} {k[1]:12s}: largest minus smallest micro-batch of a family, {len(v)} families: "
          f"mean {st.mean(v):+.3f}, median {st.median(v):+.3f}, {sum(1 for x in v if x < 0)} of {len(v)} negative")
