"""The chosen layout's (runs[0]) step over each other in-turn layout's, round by round (median over rounds) and
by the ratio of medians, in both in-turn jobs of a fidelity workload's runs.json.

    PYTHONPATH=. python docs/probes/20261207n/paired.py W/runs.json [...]"""
import statistics as st
import sys

from stored import in_turn, stored_workloads

from autoplan.validate import paired_excess

for w in stored_workloads(sys.argv[1:]):
    print(w.path)
    for job, runs in (("confirmed", in_turn(w.confirmed)), ("judged", in_turn(w.judged))):
        if not runs:
            continue
        a = runs[0].measured
        for r in runs[1:]:
            L, b = r.layout, r.measured
            name = f"dp{L.dp} tp{L.tp} pp{L.pp} vp{L.vp} mbs{L.mbs}x{L.num_microbatches} z{L.zero}"
            print(f"  {job:9s} chosen over {name:32s} paired {100 * paired_excess(a, b):+6.1f}%"
                  f"  medians {100 * (st.median(a.in_turn_s) / st.median(b.in_turn_s) - 1):+6.1f}%")
