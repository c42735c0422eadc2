"""The chosen layout's (runs[0]) step over each other in-turn layout's, round by round (median over rounds) and
by the ratio of medians, in both in-turn jobs of a fidelity workload's runs.json.

    python docs/probes/20261207n/paired.py W/runs.json [...]"""
import json
import statistics as st
import sys

for f in sys.argv[1:]:
    d = json.load(open(f))
    print(f)
    for job in ("confirmed", "judged"):
        rs = [r for r in d.get(job) or [] if r.get("measured") and r["measured"].get("in_turn_s")]
        if not rs:
            continue
        a = rs[0]["measured"]["in_turn_s"]
        for r in rs[1:]:
            b, L = r["measured"]["in_turn_s"], r["layout"]
            name = f"dp{L['dp']} tp{L['tp']} pp{L['pp']} vp{L['vp']} mbs{L['mbs']}x{L['num_microbatches']} z{L['zero']}"
            print(f"  {job:9s} chosen over {name:32s} paired {100 * (st.median(x / y for x, y in zip(a, b)) - 1):+6.1f}%"
                  f"  medians {100 * (st.median(a) / st.median(b) - 1):+6.1f}%")
