"""Fidelity: predicted against measured step time and memory, before and after calibration.

    python benchmarks/fidelity.py [--model gpt-small] [--steps 3] [--workdir /tmp/autoplan-fidelity]

On this machine: profiles the model's layers and 2- and 4-process gloo clusters, then runs at least
8 distinct layouts (DP/ZeRO, TP, PP and hybrids; 2 and 4 processes) under torchrun, each for a few
steps, and prints per layout predicted and measured step time and peak memory, then:

- mean absolute percentage error (MAPE) of step time,
- Spearman rank correlation of predicted and measured step time,
- how far the solver's chosen layout is from the fastest measured one (per world size),
- the worst memory under-prediction ((measured - predicted) / measured, 0 if never under).

"Before" uses the profiles as measured. "After" calibrates (autoplan.validate.fit_calibration)
leave-one-out: each layout is predicted by a calibration fitted to the other layouts only, so the
figure is out of sample. A calibration belongs to one cluster profile (``validate --calibrate``
writes it into the cluster it measured), so each world size is calibrated on its own layouts; a
world size with fewer than 4 other layouts (``MIN_CALIBRATION_RUNS``) borrows the layouts of the machine's
other world sizes (:func:`calibration_runs`). The solver is then re-run with the calibration fitted
to all the layouts it may use.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from autoplan.execute.group_profile import GroupProfileConfig, add_group_timings, profile_in_groups
from autoplan.plan.api import Problem, complete_layout, estimate_problem, solve_problem
from autoplan.plan.cost import evaluate
from autoplan.plan.training import TrainingConfig
from autoplan.plan.search import SearchOptions
from autoplan.profile.formats import Calibration, ClusterProfile
from autoplan.profile.layers import profile_model
from autoplan.profile.links import profile_cluster
from autoplan.jsonio import read_json, write_json_atomic
from autoplan.profile.formats import ModelProfile
from autoplan.validate import (MIN_CALIBRATION_RUNS, Measured, Run, fidelity, fit_calibration, measure_layout,
                               print_table)

SETS = {
    # the workload the cost model was developed on: gpt-small (8 blocks, h=256, GeLU), batch 8
    "default": dict(model="gpt-small", global_batch=8, layouts={  # world size -> layouts (+ the solver's choice)
        4: ["dp=4,zero=0", "dp=4,zero=3", "dp=2,tp=2,sp=1", "tp=4,sp=1", "dp=2,pp=2", "pp=4",
            "tp=2,pp=2,sp=1", "dp=2,pp=2,vp=2,mbs=1,schedule=interleaved"],
        2: ["dp=2,zero=0", "tp=2,sp=1", "pp=2", "dp=2,zero=3"]}),
    # a workload nobody tuned for: another shape (6 wider SwiGLU blocks with grouped-query attention,
    # a larger vocabulary, shorter sequences), another batch, a world size of 3, ZeRO-2, TP without SP,
    # mbs > 1 and three virtual stages
    "holdout": dict(model=str(Path(__file__).parent / "shapes" / "holdout-swiglu.json"), global_batch=12, layouts={
        4: ["dp=4,zero=0", "dp=2,tp=2,sp=0", "tp=2,pp=2,sp=1", "dp=2,pp=2,mbs=2", "pp=4,mbs=1", "dp=4,zero=3,mbs=3"],
        3: ["dp=3,zero=0", "pp=3,mbs=1", "dp=3,zero=2,mbs=2"],
        2: ["tp=2,sp=1", "pp=2,vp=3,mbs=1,schedule=interleaved", "dp=2,zero=3"]}),
}


def calibration_runs(runs_by_world: dict[int, list[Run]], world: int, leave_out: int | None = None) -> list[Run]:
    """The measured layouts a calibration of the ``world``-process cluster is fitted to: that
    cluster's own (but ``leave_out``), as ``validate --calibrate`` fits one cluster profile; where
    fewer than ``MIN_CALIBRATION_RUNS`` remain, every other layout this machine measured too."""
    own = [r for i, r in enumerate(runs_by_world[world]) if i != leave_out]
    if len(own) >= MIN_CALIBRATION_RUNS:
        return own
    return own + [r for w, rs in runs_by_world.items() if w != world for r in rs]


def parse(spec: str) -> dict:
    d = dict(kv.split("=") for kv in spec.split(","))
    return {k: (v if k in ("recompute", "schedule") else int(v)) for k, v in d.items()}


def predict(pb: Problem, spec: dict):
    return estimate_problem(pb, complete_layout(spec, pb.cluster.world_size, pb.train.global_batch))


def repredict(pb: Problem, runs: list[Run], cal: Calibration) -> list[Run]:
    cl = replace(pb.cluster, calibration=cal)
    pb2 = replace(pb, cluster=cl)
    return [replace(r, predicted=evaluate(pb2.profile, cl, r.layout, pb2.train)) for r in runs]


def report(title: str, runs: list[Run]) -> None:
    print(f"\n== {title}")
    print_table(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), default="default",
                    help="which workload: the one the model was developed on, or a held-out one")
    ap.add_argument("--model", default=None, help="model spec (default: the set's)")
    ap.add_argument("--global-batch", type=int, default=None, help="default: the set's")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--memory-per-device", type=int, default=2**30, help="bytes; large so every layout fits")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where profiles and measurements are written (default: a new temporary folder)")
    ap.add_argument("--alone-only", action="store_true",
                    help="profile layers on one process alone only (the sum-of-parts model), not inside groups")
    ap.add_argument("--reuse", action="store_true",
                    help="re-read the profiles and measurements of an earlier run in --workdir (no new runs)")
    args = ap.parse_args()
    chosen_set = SETS[args.set]
    args.model = args.model or chosen_set["model"]
    args.global_batch = args.global_batch or chosen_set["global_batch"]
    LAYOUTS = chosen_set["layouts"]
    t_start = time.perf_counter()
    if args.workdir is None:
        if args.reuse:
            ap.error("--reuse needs the --workdir of an earlier run")
        args.workdir = Path(tempfile.mkdtemp(prefix="autoplan-fidelity-"))
    args.workdir.mkdir(parents=True, exist_ok=True)
    saved = args.workdir / "runs.json"
    if args.reuse:
        prof = ModelProfile.load(args.workdir / "model.json")
    else:
        print(f"profiling {args.model} layers ...", flush=True)
        prof = profile_model(args.model, mbs_list=(1, 2, 4), repeats=5, threads=1)
        if not args.alone_only:
            for world in LAYOUTS:
                print(f"profiling {args.model} layers inside groups of {world} processes ...", flush=True)
                timings, env = profile_in_groups(GroupProfileConfig(spec=args.model, mbs_list=(1, 2, 4)), world)
                add_group_timings(prof, timings, env)
        prof.save(args.workdir / "model.json")
    old = read_json(saved, "runs") if args.reuse else {}
    train = TrainingConfig(global_batch=args.global_batch, precision="fp32", optimizer="adamw")
    problems: dict[int, Problem] = {}
    runs_by_world: dict[int, list[Run]] = {}
    chosen: dict[int, int] = {}
    for world, specs in LAYOUTS.items():
        if args.reuse:
            cl = ClusterProfile.load(args.workdir / f"cluster{world}.json")
        else:
            print(f"profiling {world} processes ...", flush=True)
            cl = profile_cluster(world, memory_per_device_bytes=args.memory_per_device)
            cl.save(args.workdir / f"cluster{world}.json")
        pb = Problem(prof, cl, train, str(args.workdir / "model.json"), str(args.workdir / f"cluster{world}.json"))
        problems[world] = pb
        plan = solve_problem(pb, SearchOptions(), families=False)
        cands = [predict(pb, parse(s)) for s in specs]
        keys = [c[0].short() for c in cands]
        if plan.layout.short() not in keys:
            cands.append((plan.layout, plan.predicted))
            keys.append(plan.layout.short())
        chosen[world] = keys.index(plan.layout.short())
        runs = []
        for lay, pred in cands:
            if args.reuse:
                m = Measured(**old[str(world)][lay.short()])
            else:
                print(f"  measuring {lay.short()} ...", flush=True)
                m = measure_layout(pb, lay, pred, steps=args.steps, warmup=args.warmup, workdir=args.workdir)
            runs.append(Run(lay, pred, m))
        runs_by_world[world] = runs
    if not args.reuse:
        write_json_atomic(saved, {str(w): {r.layout.short(): asdict(r.measured) for r in rs}
                                  for w, rs in runs_by_world.items()})

    def summary(title: str, by_world: dict[int, list[Run]], chosen_idx: dict[int, int]) -> None:
        everything = [r for w in by_world for r in by_world[w]]
        for w, runs in by_world.items():
            report(f"{title}: {w} processes (chosen marked *)", [runs[chosen_idx[w]]] +
                   [r for i, r in enumerate(runs) if i != chosen_idx[w]])
        f = fidelity(everything)
        spread = max(r.measured.step_time_s for r in everything) / min(r.measured.step_time_s for r in everything)
        per_world = {w: fidelity([runs[chosen_idx[w]]] + [r for i, r in enumerate(runs) if i != chosen_idx[w]])
                     for w, runs in by_world.items()}
        print(f"{title}: {f.runs} layouts, measured step times differ {spread:.2f}x; "
              f"step-time MAPE {f.time_mape * 100:.1f}%; rank correlation {f.rank_correlation:.3f}; "
              + "; ".join(f"chosen vs fastest ({w} proc) {pw.chosen_vs_fastest * 100:+.1f}%" for w, pw in per_world.items())
              + f"; worst memory under-prediction {f.worst_memory_underprediction * 100:.1f}%", flush=True)

    summary("BEFORE calibration", runs_by_world, chosen)

    # leave-one-out calibration, each world size's cluster on its own layouts (calibration_runs)
    after: dict[int, list[Run]] = {w: list(rs) for w, rs in runs_by_world.items()}
    for w, runs in runs_by_world.items():
        for i in range(len(runs)):
            cal = fit_calibration(calibration_runs(runs_by_world, w, leave_out=i), Calibration())
            after[w][i] = repredict(problems[w], [runs[i]], cal)[0]
    full = {w: fit_calibration(calibration_runs(runs_by_world, w), Calibration()) for w in runs_by_world}
    print()
    for w, cal in full.items():
        print(f"calibration of the {w}-process cluster fitted to all its layouts: {cal.summary()}")
    # the calibrated solver's choice, measured if it is new
    chosen_after = {}
    for w, pb in problems.items():
        pbc = replace(pb, cluster=replace(pb.cluster, calibration=full[w]))
        plan = solve_problem(pbc, SearchOptions(), families=False)
        keys = [r.layout.short() for r in after[w]]
        if plan.layout.short() not in keys and args.reuse:
            print(f"  (the calibrated choice {plan.layout.short()} was not measured in the reused run)")
            chosen_after[w] = min(range(len(keys)), key=lambda i: after[w][i].predicted.step_time_s)
            continue
        if plan.layout.short() not in keys:
            print(f"  measuring the calibrated choice {plan.layout.short()} ...", flush=True)
            m = measure_layout(pbc, plan.layout, plan.predicted, steps=args.steps, warmup=args.warmup,
                               workdir=args.workdir)
            after[w].append(Run(plan.layout, plan.predicted, m))
            keys.append(plan.layout.short())
        chosen_after[w] = keys.index(plan.layout.short())
    summary("AFTER calibration (leave-one-out)", after, chosen_after)
    print(f"\nbenchmark wall time {time.perf_counter() - t_start:.0f} s; profiles in {args.workdir}")


if __name__ == "__main__":
    main()
