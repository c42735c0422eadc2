"""Pre-registered variants of the cost model, judged on stored fidelity workloads (re-predicted from the
stored runs, each profile's pipeline costs refitted, the pick among the measured layouts judged on both
in-turn jobs pooled and on job 1 alone, as ../20261205d/retro.py does).

Run with PYTHONPATH at a worktree carrying variants.patch (its switches are environment variables):

    PYTHONPATH=<worktree> python docs/probes/20261206b/variants.py '/work/exp/s1*/d*/w*'

Variants (written down at 04:30 UTC on 2026-12-06, before seed 20261247 was drawn):
  head        the cost model as at 8033773
  fc_pooled   AP_FC_POOLED: one composition factor per profile (geometric mean of the factors at the
              sizes where the whole model was measured) instead of one per micro-batch size
  s_at_mbs    AP_S_AT_MBS: the relief's slowdown carried to the layout's micro-batch size by the layers'
              in-group / alone ratio (tried before as v1.py, 28/42 against 32/42)
  big_mbs2    head's predictions; among layouts predicted within 2% of the best, the largest
              micro-batch (tried before as tie.py on 42 workloads)
"""
import math, os, statistics as st, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import load_runs, pooled, refitted_problem, stored_workloads   # noqa: E402
from autoplan.plan.api import estimate_problem                          # noqa: E402
from autoplan.plan.plan import Layout                                   # noqa: E402

VARIANTS = {"head": {}, "fc_pooled": {"AP_FC_POOLED": "1"}, "s_at_mbs": {"AP_S_AT_MBS": "1"},
            "big_mbs2": {}}
SWITCHES = ("AP_FC_POOLED", "AP_S_AT_MBS")


def predictions(wl, env):
    for k in SWITCHES:
        os.environ.pop(k, None)
    os.environ.update(env)
    d, once, j1, j2 = load_runs(wl)
    pb = refitted_problem(wl, d)
    out = {}
    for k, r in once.items():
        _, pr = estimate_problem(pb, Layout.from_dict(r["layout"]))
        out[k] = (pr.step_time_s, Layout.from_dict(r["layout"]), r["measured"]["step_time_s"])
    return out, pooled(j1, j2), j1


def pick(pred, name):
    best = min(p for p, _, _ in pred.values())
    if name == "big_mbs2":
        near = [k for k, (p, _, _) in pred.items() if p <= best * 1.02]
        return min(near, key=lambda k: (-pred[k][1].mbs, pred[k][0]))
    return min(pred, key=lambda k: pred[k][0])


def main(patterns):
    wls = sorted(w for a in patterns for w in stored_workloads(a))
    for name, env in VARIANTS.items():
        rows = []
        for wl in wls:
            pred, pool, j1 = predictions(wl, env)
            ch = pick(pred, name)
            miss = pool[ch] / min(pool.values()) - 1 if ch in pool else float("nan")
            m1 = j1[ch] / min(j1.values()) - 1 if ch in j1 else float("nan")
            err = st.mean(abs(p / m - 1) for p, _, m in pred.values())
            rows.append((wl, ch, miss, m1, err))
            print(f"{name:9s} {wl[-18:]:18s} err {err:5.1%} pick pooled {miss:+6.1%} job1 {m1:+6.1%}  {ch}", flush=True)
        ok = sum(r[2] <= 0.05 for r in rows)
        ok1 = sum(r[3] <= 0.05 for r in rows)
        print(f"== {name}: n={len(rows)} within 5% pooled {ok} job1 {ok1}; mean error {st.mean(r[4] for r in rows):.1%}; "
              f"mean pooled miss {st.mean(r[2] for r in rows if r[2] == r[2]):+.2%}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
