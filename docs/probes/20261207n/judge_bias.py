"""How often does fidelity.py's judge (the chosen layout's paired excess over the fastest median of the first in-turn
job, in that job) fail a layout that ran fastest in the other, independent job?  And the model's choice judged the
unbiased way: against the layout fastest in job 1, both timed in job 2 (as fidelity.py judges validate --out's pick).

    PYTHONPATH=. python docs/probes/20261207n/judge_bias.py [GLOB ...]"""
import statistics as st
import sys

from stored import DEFAULT_GLOBS, in_turn, stored_workloads

from autoplan.validate import paired_excess

n = fail_oracle = fail_chosen = fail_unbiased = 0
print(f"{'workload':60s} {'oracle@job1':>11s} {'chosen@job1':>11s} {'chosen@job2 vs job1-fastest':>28s}")
for w in stored_workloads(sys.argv[1:] or DEFAULT_GLOBS):
    j1 = {r.layout.short(): r.measured for r in in_turn(w.confirmed)}
    j2 = {r.layout.short(): r.measured for r in in_turn(w.judged)}
    common = set(j1) & set(j2)
    chosen = w.runs[0].layout.short()
    if len(common) < 2 or chosen not in common:
        continue
    f1 = min(common, key=lambda k: st.median(j1[k].in_turn_s))
    f2 = min(common, key=lambda k: st.median(j2[k].in_turn_s))
    oracle = 0.0 if f2 == f1 else paired_excess(j1[f2], j1[f1])
    cur = 0.0 if chosen == f1 else paired_excess(j1[chosen], j1[f1])
    unb = 0.0 if chosen == f1 else paired_excess(j2[chosen], j2[f1])
    n += 1
    fail_oracle += oracle > 0.05
    fail_chosen += cur > 0.05
    fail_unbiased += unb > 0.05
    print(f"{w.path[-60:]:60s} {100 * oracle:+10.1f}% {100 * cur:+10.1f}% {100 * unb:+27.1f}%")
print(f"{n} workloads with two in-turn jobs over the same layouts; over 5%: job 2's fastest judged in job 1 "
      f"{fail_oracle}, the model's choice judged in job 1 (fidelity.py's judge) {fail_chosen}, the model's choice "
      f"against job 1's fastest in job 2 {fail_unbiased}")
