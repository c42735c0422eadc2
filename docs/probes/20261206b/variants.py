"""Pre-registered variants of the cost model, judged on stored fidelity workloads (re-predicted from the
stored runs, each profile's pipeline costs refitted, the pick among the measured layouts judged on both
in-turn jobs pooled and on job 1 alone, as ../20261205d/retro.py does).

Run with PYTHONPATH at a worktree carrying variants.patch (its switches are environment variables):

    PYTHONPATH=<worktree> python docs/probes/20261206b/variants.py '/work/exp/s1[0-8]*/d*/w*'   # the 67 stored before this session

Variants (written down at 04:30 UTC on 2026-12-06, before seed 20261247 was drawn):
  head        the cost model as at 8033773
  fc_pooled   AP_FC_POOLED: one composition factor per profile (geometric mean of the factors at the
              sizes where the whole model was measured) instead of one per micro-batch size
  s_at_mbs    AP_S_AT_MBS: the relief's slowdown carried to the layout's micro-batch size by the layers'
              in-group / alone ratio (tried before as v1.py, 28/42 against 32/42)
  big_mbs2    head's predictions; among layouts predicted within 2% of the best, the largest
              micro-batch (tried before as tie.py on 42 workloads)
Added at 07:12 UTC on 2026-12-06 (sixteenth session), before seed 20261250 was drawn:
  fc_s        AP_FC_POOLED and AP_S_AT_MBS together (the two arms that did best on the 14 fresh
              workloads of seeds 20261247-49: 11 / 11 and 12 / 11 within 5% pooled / job 1, head 10 / 9)
Added at 08:25 UTC on 2026-12-06 (sixteenth session), after seeds 20261250-51 were seen and before seed
20261252 was drawn (so only 20261252 on is out of sample for it):
  fc_runs     AP_FC_RUNS: a pipeline layout's chunks take the composition factor at the micro-batch size of
              the pipeline runs its terms were fitted on, not at its own size (the whole model's factor
              moves with the size by a working set a chunk of 1/pp of the layers does not have: seed
              20261251 w1, 3 processes, f_c 0.886 at mbs 2 and 1.062 at mbs 4, where the layers' in-group
              time per sample falls 10% from mbs 2 to 4); data-parallel layouts keep the factor at their size
"""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import argmin_pick, judge_workload, stored_workloads, summary   # noqa: E402

VARIANTS = {"head": {}, "fc_pooled": {"AP_FC_POOLED": "1"}, "s_at_mbs": {"AP_S_AT_MBS": "1"},
            "big_mbs2": {}, "fc_s": {"AP_FC_POOLED": "1", "AP_S_AT_MBS": "1"},
            "fc_runs": {"AP_FC_RUNS": "1"}}
SWITCHES = ("AP_FC_POOLED", "AP_S_AT_MBS", "AP_FC_RUNS")


def largest_mbs_within_2pct(pred):
    """Among the layouts predicted within 2% of the best, the largest micro-batch (``big_mbs2``)."""
    best = min(p for p, _ in pred.values())
    near = [k for k, (p, _) in pred.items() if p <= best * 1.02]
    return min(near, key=lambda k: (-pred[k][1].mbs, pred[k][0]))


def main(patterns):
    wls = sorted(w for a in patterns for w in stored_workloads(a))
    for name, env in VARIANTS.items():
        for k in SWITCHES:
            os.environ.pop(k, None)
        os.environ.update(env)
        pick = largest_mbs_within_2pct if name == "big_mbs2" else argmin_pick
        rows = []
        for wl in wls:
            rows.append(judge_workload(wl, pick=pick))
            _, ch, miss, m1, err = rows[-1]
            print(f"{name:9s} {wl[-18:]:18s} err {err:5.1%} pick pooled {miss:+6.1%} job1 {m1:+6.1%}  {ch}", flush=True)
        n, ok, ok1, err, miss = summary(rows)
        print(f"== {name}: n={n} within 5% pooled {ok} job1 {ok1}; mean error {err:.1%}; "
              f"mean pooled miss {miss:+.2%}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
