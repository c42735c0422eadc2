"""How often does fidelity.py's judge (the chosen layout's paired excess over the fastest median of the first in-turn
job, in that job) fail a layout that ran fastest in the other, independent job?  And the model's choice judged the
unbiased way: against the layout fastest in job 1, both timed in job 2 (as fidelity.py judges validate --out's pick).

    python docs/probes/20261207n/judge_bias.py [GLOB ...]"""
import glob
import json
import statistics as st
import sys


def key(L):
    return json.dumps(L, sort_keys=True)


def paired(a, b):
    return st.median(x / y for x, y in zip(a, b)) - 1.0


pats = sys.argv[1:] or ["docs/probes/**/*runs*.json", "/work/exp/**/runs.json"]
paths = sorted({p for pat in pats for p in glob.glob(pat, recursive=True)})
n = fail_oracle = fail_chosen = fail_unbiased = 0
seen = set()                   # the same workload stored twice (a copy under docs/probes) counts once
print(f"{'workload':60s} {'oracle@job1':>11s} {'chosen@job1':>11s} {'chosen@job2 vs job1-fastest':>28s}")
for f in paths:
    try:
        d = json.load(open(f))
    except (OSError, ValueError):
        continue
    if not isinstance(d, dict) or not d.get("confirmed") or not d.get("judged"):
        continue
    j1 = {key(r["layout"]): r["measured"]["in_turn_s"] for r in d["confirmed"]
          if r.get("measured") and r["measured"].get("in_turn_s")}
    j2 = {key(r["layout"]): r["measured"]["in_turn_s"] for r in d["judged"]
          if r.get("measured") and r["measured"].get("in_turn_s")}
    common = set(j1) & set(j2)
    sig = json.dumps(sorted(j1.values()))
    if sig in seen:
        continue
    seen.add(sig)
    chosen = key(d["runs"][0]["layout"])
    if len(common) < 2 or chosen not in common:
        continue
    f1 = min(common, key=lambda k: st.median(j1[k]))
    f2 = min(common, key=lambda k: st.median(j2[k]))
    oracle = 0.0 if f2 == f1 else paired(j1[f2], j1[f1])
    cur = 0.0 if chosen == f1 else paired(j1[chosen], j1[f1])
    unb = 0.0 if chosen == f1 else paired(j2[chosen], j2[f1])
    n += 1
    fail_oracle += oracle > 0.05
    fail_chosen += cur > 0.05
    fail_unbiased += unb > 0.05
    print(f"{f[-60:]:60s} {100 * oracle:+10.1f}% {100 * cur:+10.1f}% {100 * unb:+27.1f}%")
print(f"{n} workloads with two in-turn jobs over the same layouts; over 5%: job 2's fastest judged in job 1 "
      f"{fail_oracle}, the model's choice judged in job 1 (fidelity.py's judge) {fail_chosen}, the model's choice "
      f"against job 1's fastest in job 2 {fail_unbiased}")
