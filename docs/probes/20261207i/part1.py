"""Probes 20261207i part 1 (PREREGISTRATION.md): do the pipeline terms fitted at micro-batch 1 carry to 4?

    PYTHONPATH=. python docs/probes/20261207i/part1.py WORKDIR [--launch OUTDIR] [--global-batch 16]

WORKDIR holds model.json (profiled on the probe-mbs branch: pipeline runs at the smallest and the largest
profiled micro-batch) and cluster.json. Fit A: the runs at the smallest micro-batch (main's fit); fit B: the
runs at the largest. H1: both fits re-predict the profile's own runs at each micro-batch, per depth. With
--launch: the six layouts launched once each with 20261206h's phases_worker.py, predicted with A and B."""
import argparse
import json
import math
import os
import statistics as st
import sys
from pathlib import Path

from autoplan.plan import pipeline_costs as pc
from autoplan.plan.api import estimate_problem, make_problem
from autoplan.plan.layout_input import parse_layout_constraints
from autoplan.plan.plan import Layout, SolverInfo
from autoplan.profile.formats import ModelProfile

from launches import PHASES_WORKER, launch_worker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import saved   # noqa: E402

LAYOUTS = ["dp=1,tp=1,pp=4,mbs=1,m=16,schedule=1f1b", "dp=2,tp=1,pp=2,mbs=1,m=8,schedule=1f1b",
           "dp=1,tp=1,pp=4,mbs=2,m=8,schedule=1f1b", "dp=2,tp=1,pp=2,mbs=2,m=4,schedule=1f1b",
           "dp=1,tp=1,pp=4,mbs=4,m=4,schedule=1f1b", "dp=2,tp=1,pp=2,mbs=4,m=2,schedule=1f1b"]


def profile_fitted_at(prof: ModelProfile, mbs: int) -> ModelProfile:
    """A copy of ``prof`` whose pipeline runs are those at ``mbs`` only, its costs fitted from them."""
    p = ModelProfile.from_dict(prof.to_dict())
    p.pipeline_timings = [t for t in p.pipeline_timings if t.mbs == mbs]
    p.pipeline_costs = [c for c in (pc.fit_pipeline_costs(p, w, d) for w, d in
                                    sorted({(t.world, t.pp) for t in p.pipeline_timings})) if c]
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--launch")
    ap.add_argument("--global-batch", type=int, default=16)
    a = ap.parse_args()
    prof = ModelProfile.load(f"{a.workdir}/model.json")
    sizes = sorted({t.mbs for t in prof.pipeline_timings})
    fits = {m: profile_fitted_at(prof, m) for m in sizes}
    print("runs by micro-batch:", {m: sum(1 for t in prof.pipeline_timings if t.mbs == m) for m in sizes})
    for m, p in fits.items():
        for c in p.pipeline_costs:
            print(f"fit at mbs {m}, world {c.world} pp {c.pp}: per_chunk {c.per_chunk_s * 1e3:.2f} ms, interleaved "
                  f"{c.per_chunk_interleaved_s * 1e3:.2f} ms, per_step {c.per_step_s * 1e3:.2f} ms, e {c.idle_share}, "
                  f"s {c.slowdown}, fit error {c.fit_error:.1%}")
    print("\nH1: each fit re-predicting the profile's own runs (log(pred/meas), mean per depth and run micro-batch)")
    for fm, p in fits.items():
        for rm in sizes:
            units = pc._unit_times(prof, prof.pipeline_timings[0].world, rm)
            for depth in sorted({t.pp for t in prof.pipeline_timings}):
                costs = next(c for c in p.pipeline_costs if c.pp == depth)
                rows = []
                for t in prof.pipeline_timings:
                    if t.mbs == rm and t.pp == depth:
                        pred = pc.predicted_step_s(t, units, costs)
                        rows.append(math.log(pred / t.step_s))
                        print(f"  fit mbs {fm} | run pp{t.pp} vp{t.vp} {t.schedule} m{t.num_microbatches} mbs{rm}: "
                              f"measured {t.step_s * 1e3:.0f} ms, predicted {pred * 1e3:.0f} ms ({pred / t.step_s - 1:+.1%})")
                print(f"fit mbs {fm} on runs at mbs {rm}, pp {depth}: mean log(pred/meas) {st.mean(rows):+.3f} over {len(rows)}")
    if not a.launch:
        return
    out = Path(a.launch)
    out.mkdir(parents=True, exist_ok=True)
    probs = {m: make_problem(saved(p), f"{a.workdir}/cluster.json", a.global_batch, memory_per_device_bytes=2**30)
             for m, p in fits.items()}
    lo, hi = sizes[0], sizes[-1]
    err = {"A": [], "nearest": []}
    for n, spec in enumerate(LAYOUTS):
        L, prA = estimate_problem(probs[lo], Layout(**parse_layout_constraints(spec)))
        _, prB = estimate_problem(probs[hi], L)
        path = out / f"plan{n}.json"
        probs[lo].plan(L, prA, SolverInfo("n/a", 0.0, 0.0, 0.0)).save(path)
        res = launch_worker(path, out / f"phases{n}.json", L.short(), worker=PHASES_WORKER)
        if res is None:
            continue
        meas = st.median(res["measure"])
        near = prB if abs(math.log(L.mbs / hi)) < abs(math.log(L.mbs / lo)) else prA
        err["A"].append(abs(meas / prA.step_time_s - 1))
        err["nearest"].append(abs(meas / near.step_time_s - 1))
        print(f"{L.short()}: measured {meas * 1e3:.0f} ms; A {prA.step_time_s * 1e3:.0f} ms "
              f"({meas / prA.step_time_s - 1:+.1%}), B {prB.step_time_s * 1e3:.0f} ms ({meas / prB.step_time_s - 1:+.1%})",
              flush=True)
        (out / f"summary{n}.json").write_text(json.dumps({"layout": L.short(), "measure_s": meas,
                                                          "pred_A_s": prA.step_time_s, "pred_B_s": prB.step_time_s}))
    print(f"mean abs error over {len(err['A'])}: A alone {st.mean(err['A']):.1%}, nearest fit {st.mean(err['nearest']):.1%}")


if __name__ == "__main__":
    main()
