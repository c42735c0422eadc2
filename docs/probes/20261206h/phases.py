"""Probes 20261206h, the level probe: where does a validate launch spend the time the cost model does not see?

    PYTHONPATH=. python docs/probes/20261206h/phases.py /work/exp/s23/shape160x8/w0 OUTDIR "LAYOUT" ["LAYOUT" ...]

Each layout (as ``--layout`` takes it, every field given, e.g. "dp=1,tp=1,pp=4,mbs=1,m=16,schedule=1f1b") is planned on the stored
workload's profiles and launched once under torchrun with phases_worker.py (12 rounds after 2, three ways of timing a
step in turn). Printed beside the medians: the model's prediction and breakdown, and the profile's own pipeline run of
the same layout where it made one (its step is the schedule's alone: no optimizer, no loss all-reduce)."""
import json
import os
import statistics as st
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import load_runs, problem   # noqa: E402

from phases_worker import launch_worker   # noqa: E402

from autoplan.plan.api import estimate_problem   # noqa: E402
from autoplan.plan.layout_input import parse_layout_constraints   # noqa: E402
from autoplan.plan.plan import Layout, SolverInfo   # noqa: E402
from autoplan.profile.formats import ModelProfile   # noqa: E402

def main():
    wl, out, shorts = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    out.mkdir(parents=True, exist_ok=True)
    d, once, j1, _ = load_runs(wl)
    pb = problem(wl, d)
    prof = ModelProfile.load(f"{wl}/model.json")
    for n, short in enumerate(shorts):
        L, pr = estimate_problem(pb, Layout(**parse_layout_constraints(short)))
        key = L.short()
        path = out / f"plan{n}.json"
        pb.plan(L, pr, SolverInfo("n/a", 0.0, 0.0, 0.0)).save(path)
        r = launch_worker(path, out / f"phases{n}.json", key)
        if r is None:
            continue
        med = {k: st.median(v) for k, v in r.items()}
        bd = {k: round(v * 1e3, 1) for k, v in pr.breakdown_s.items() if v}
        runs = [t.step_s for t in prof.pipeline_timings if t.world == L.world_size and t.pp == L.pp and t.vp == L.vp
                and t.mbs == L.mbs and t.num_microbatches == L.num_microbatches and L.pp * L.dp == t.world]
        stored = (f"once {once[key]['measured']['step_time_s'] * 1e3:.0f} ms" if key in once else
                  "not measured by validate")
        stored += f", first in-turn job {j1[key] * 1e3:.0f} ms" if key in j1 else ""
        stored += f", the profile's run {runs[0] * 1e3:.0f} ms" if runs else ""
        print(f"{key}\n  predicted {pr.step_time_s * 1e3:.0f} ms {bd}\n  stored: {stored}")
        print("  now (medians of 12 rounds): " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in med.items()))
        print(f"  measure / predicted {med['measure'] / pr.step_time_s - 1:+.1%}; fb_only / (predicted - optimizer - "
              f"dp_sync) {med['fb_only'] / (pr.step_time_s - pr.breakdown_s.get('optimizer', 0) - pr.breakdown_s.get('dp_sync', 0)) - 1:+.1%}; "
              f"opt phase {med['opt'] * 1e3:.1f} ms against the model's optimizer {pr.breakdown_s.get('optimizer', 0) * 1e3:.1f} ms; "
              f"train / measure {med['train'] / med['measure'] - 1:+.1%}", flush=True)
        (out / f"summary{n}.json").write_text(json.dumps({"layout": key, "medians_s": med, "predicted_s": pr.step_time_s,
                                                          "breakdown_s": pr.breakdown_s,
                                                          "profile_run_s": runs[0] if runs else None}))


if __name__ == "__main__":
    main()
