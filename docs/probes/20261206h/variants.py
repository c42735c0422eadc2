"""Probes 20261206h: the pipeline terms fitted per depth (V0, main) against one fit per world over every depth's runs
(V1), on the stored fidelity workloads (PREREGISTRATION.md).

    PYTHONPATH=. python docs/probes/20261206h/variants.py
"""
import math
import os
import statistics as st
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import load_runs, pooled, problem, refitted_problem, stored_workloads   # noqa: E402

import autoplan.plan.pipeline_costs as pc   # noqa: E402
from autoplan.plan.api import estimate_problem   # noqa: E402
from autoplan.plan.plan import Layout   # noqa: E402
from autoplan.profile.formats import ModelProfile   # noqa: E402


def variant_problem(wl, d, variant):
    """The workload's planning problem with its pipeline terms refitted: V0 one fit per stored (world, depth)
    (:func:`retro.refitted_problem`), V1 one fit per world over all its runs (pp=0)."""
    if variant == "V0":
        return refitted_problem(wl, d)
    p = ModelProfile.load(f"{wl}/model.json")
    worlds = sorted({c.world for c in p.pipeline_costs})
    p.pipeline_costs = [c for c in (pc.fit_pipeline_costs(p, w, 0) for w in worlds) if c]
    path = os.path.join(tempfile.mkdtemp(), "model.json")
    p.save(path)
    return problem(wl, d, path)


def predictions(wl, variant):
    """{layout key: predicted step s} of the workload's once-measured layouts under ``variant``."""
    d, once, _, _ = load_runs(wl)
    pb = variant_problem(wl, d, variant)
    return {k: estimate_problem(pb, Layout.from_dict(r["layout"]))[1].step_time_s for k, r in once.items()}


def judge(wl, pred):
    """(mean abs. error against the once-measured runs, against the first in-turn job, the pick's miss on the pooled
    in-turn medians) of the predictions ``pred`` of workload ``wl``."""
    _, once, j1, j2 = load_runs(wl)
    pool = pooled(j1, j2)
    ch = min(pred, key=pred.get)
    err = st.mean(abs(pred[k] / once[k]["measured"]["step_time_s"] - 1) for k in once)
    errj1 = st.mean(abs(pred[k] / j1[k] - 1) for k in j1) if j1 else float("nan")
    miss = pool[ch] / min(pool.values()) - 1 if ch in pool else float("nan")
    return err, errj1, miss


def main():
    wls = stored_workloads("/work/exp/s2*/d*/w*")
    res = {v: {} for v in ("V0", "V1")}
    for wl in wls:
        for v in res:
            res[v][wl] = judge(wl, predictions(wl, v))
        a, b = res["V0"][wl], res["V1"][wl]
        print(f"{wl[-17:]:17s} V0 err {a[0]:5.1%} j1 {a[1]:5.1%} miss {a[2]:+6.1%} | V1 err {b[0]:5.1%} j1 {b[1]:5.1%} "
              f"miss {b[2]:+6.1%}", flush=True)
    seeds = sorted({wl.split("/")[-2] for wl in wls})
    for s in seeds + ["all"]:
        line = [s]
        for v in res:
            rows = [r for wl, r in res[v].items() if s == "all" or wl.split("/")[-2] == s]
            line.append(f"{v}: n={len(rows)} within5 {sum(1 for r in rows if r[2] <= 0.05)} err {st.mean(r[0] for r in rows):.1%}"
                        f" err-j1 {st.mean(r[1] for r in rows if r[1] == r[1]):.1%}")
        print("  ".join(line))
    r1, r2 = "/work/exp/s23/shape192x6/w0", "/work/exp/s23/shape192x6_r2/w0"
    shapes = (r1, r2, "/work/exp/s23/shape160x8/w0")
    for v in res:
        pred = {wl: predictions(wl, v) for wl in shapes}
        p1, p2 = pred[r1], pred[r2]
        common = [k for k in p1 if k in p2]
        moves = [p2[k] / p1[k] - 1 for k in common]
        print(f"192x6 {v}: {len(common)} layouts, prediction r2/r1 geometric mean "
              f"{math.exp(st.mean(math.log(1 + m) for m in moves)) - 1:+.1%}, mean |move| {st.mean(map(abs, moves)):.1%}")
        for wl in shapes:
            err, errj1, miss = judge(wl, pred[wl])
            print(f"   {wl[-20:]}: err {err:.1%} err-j1 {errj1:.1%} miss pooled {miss:+.1%}")


if __name__ == "__main__":
    main()
