"""Fidelity: predicted against measured step time and memory, before and after calibration.

    python benchmarks/fidelity.py [--set default|holdout] [--steps 3] [--warmup 2] [--workdir /tmp/autoplan-fidelity]
    python benchmarks/fidelity.py --random 6 [--seed 20261201]
    python benchmarks/fidelity.py --shape benchmarks/shapes/issue24-192x6.json --global-batch 16 --world 4

On this machine: profiles the model's layers and 2- and 4-process gloo clusters, then runs at least
8 distinct layouts (DP/ZeRO, TP, CP, PP and hybrids; 2 and 4 processes) under torchrun, each for a few
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
to all the layouts it may use but the fastest measured one of its world size (held out: a
calibration that has seen the fastest layout's time would find it for that reason), and its choice
is measured if it is new.

``--random N``: N workloads nobody chose, drawn from ``--seed`` (default: today's date as YYYYMMDD,
so that a figure is not from a seed picked after the fact; :func:`draw_workloads`): GeLU or SwiGLU,
grouped-query attention, 4-12 blocks, width 128-384, sequence 64-160, a global batch, 2, 3 or 4
processes. Each is profiled as the README's walkthrough says (``autoplan profile model --mbs 1,2,4[,B/W]
--nproc W``, the sizes 1, 2, 4 and the global batch per process, :meth:`Workload.profiled_mbs`; and
``autoplan profile cluster --nproc W``, run as commands) and validated as
``autoplan validate --top-k 10`` does; printed per workload and overall: step-time error (mean abs.),
rank correlation, the chosen layout's measured time over the fastest measured, and the worst memory
under-prediction (before calibration). The choice is judged after ``--confirm K`` (default 3): the
chosen layout and every layout measured faster than it or at most 30% slower
(``autoplan.validate.CONFIRM_WITHIN``) are measured again side by side in one job, K x the steps each,
one step of each in turn (``autoplan.validate.confirm_in_turn``, what ``validate --confirm K`` does), and
the chosen one is compared with the fastest of that job (the lowest median) round by round: the median over
rounds of its step over the fastest one's (``autoplan.validate.paired_excess``; until 2026-12-07 the ratio of
the two medians, still printed beside it). Until 2026-12-04 they were
launched K more times each, round-robin, and until the sixth session of 2026-12-04 only the layouts
measured faster were in the job, judged against the others' launches of minutes before. The figure from one
measurement each is printed beside it, and
the largest interquartile spread of one layout's in-turn steps: the machine's own timing noise. Then the same
layouts are timed in turn again in a second job, which judges ``autoplan validate --out``'s pick (the fastest of
the first job, :func:`autoplan.validate.measured_pick`) and, beside it, the model's choice: the first job cannot
judge the layout it picked (the fastest of several noisy medians is biased low).

``--shape FILE --global-batch B --world W``: one given workload, profiled and validated as ``--random``
does. ``shapes/issue24-192x6.json`` and ``shapes/issue24-160x8.json`` are issue 24's two shapes (6 blocks of
width 192 and 8 of width 160, batch 16 on 4 processes; the issue names only those, so heads of 32, GeLU, ffn 4h,
vocabulary 4096 and sequence 128 are assumed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from autoplan.execute.group_profile import GroupProfileConfig, default_group_jobs, job_spread_line, profile_groups_into
from autoplan.plan.api import Problem, complete_layout, estimate_problem, solve_problem
from autoplan.plan.cost import evaluate
from autoplan.plan.training import TrainingConfig
from autoplan.plan.search import SearchOptions
from autoplan.profile.formats import Calibration, ClusterProfile
from autoplan.profile.layers import profile_model
from autoplan.profile.links import profile_cluster
from autoplan.jsonio import read_json, write_json_atomic
from autoplan.profile.formats import ModelProfile
from autoplan.validate import (CONFIRM_WITHIN, MIN_CALIBRATION_RUNS, TIMED_STEPS, WARMUP_STEPS, Fidelity, Measured,
                               Run, confirm_in_turn, fidelity, fit_calibration, in_turn_indices, measure_layout,
                               measured_pick, print_table)

SETS = {
    # the workload the cost model was developed on: gpt-small (8 blocks, h=256, GeLU), batch 8
    "default": dict(model="gpt-small", global_batch=8, layouts={  # world size -> layouts (+ the solver's choice)
        4: ["dp=4,zero=0", "dp=4,zero=3", "dp=2,tp=2,sp=1", "tp=4,sp=1", "dp=2,pp=2", "pp=4",
            "tp=2,pp=2,sp=1", "dp=2,pp=2,vp=2,mbs=1,schedule=interleaved", "dp=2,cp=2"],
        2: ["dp=2,zero=0", "tp=2,sp=1", "pp=2", "dp=2,zero=3", "cp=2"]}),
    # a workload nobody tuned for: another shape (6 wider SwiGLU blocks with grouped-query attention,
    # a larger vocabulary, shorter sequences), another batch, a world size of 3, ZeRO-2, TP without SP,
    # mbs > 1 and three virtual stages
    "holdout": dict(model=str(Path(__file__).parent / "shapes" / "holdout-swiglu.json"), global_batch=12, layouts={
        4: ["dp=4,zero=0", "dp=2,tp=2,sp=0", "tp=2,pp=2,sp=1", "dp=2,pp=2,mbs=2", "pp=4,mbs=1", "dp=4,zero=3,mbs=3",
            "cp=2,tp=2,sp=1"],
        3: ["dp=3,zero=0", "pp=3,mbs=1", "dp=3,zero=2,mbs=2"],
        2: ["tp=2,sp=1", "pp=2,vp=3,mbs=1,schedule=interleaved", "dp=2,zero=3", "cp=2,mbs=2"]}),
}


def calibration_runs(runs_by_world: dict[int, list[Run]], world: int, leave_out: int | None = None) -> list[Run]:
    """The measured layouts a calibration of the ``world``-process cluster is fitted to: that
    cluster's own (but ``leave_out``), as ``validate --calibrate`` fits one cluster profile; where
    fewer than ``MIN_CALIBRATION_RUNS`` remain, every other layout this machine measured too."""
    own = [r for i, r in enumerate(runs_by_world[world]) if i != leave_out]
    if len(own) >= MIN_CALIBRATION_RUNS:
        return own
    return own + [r for w, rs in runs_by_world.items() if w != world for r in rs]


WIDTHS = (128, 192, 256, 320, 384)
"""model widths --random draws from"""
GLOBAL_BATCHES = (8, 12, 16)
"""global batches --random draws from (those the world size divides)"""
WORLDS = (2, 3, 4)


@dataclass(frozen=True)
class Workload:
    """One drawn workload: a model shape (a shape file's fields), a global batch and a world size."""

    shape: dict
    global_batch: int
    world: int

    def describe(self) -> str:
        sh = self.shape
        return (f"{sh['name']}: {sh['layers']} blocks, h={sh['hidden']}, {sh['heads']} heads ({sh['kv_heads']} kv), "
                f"ffn {sh['ffn_hidden']} {sh['mlp']}, vocab {sh['vocab']}, seq {sh['seq_len']}; "
                f"batch {self.global_batch} on {self.world} processes")

    def profiled_mbs(self) -> list[int]:
        """The micro-batch sizes its profile times, as the README's walkthrough says: 1, 2, 4 and the
        global batch per process (what pure data parallel runs as one micro-batch), so that a size the
        solver may choose for data parallel is measured, not extrapolated."""
        sizes = {1, 2, 4}
        if self.global_batch % self.world == 0:
            sizes.add(self.global_batch // self.world)
        return sorted(sizes)


def today_seed() -> int:
    """Today's date (UTC) as YYYYMMDD: the seed --random uses unless given one."""
    return int(datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d"))


def draw_workloads(n: int, seed: int) -> list[Workload]:
    """``n`` workloads from ``seed`` (the same every time): GeLU or SwiGLU, grouped-query attention
    (kv heads a proper divisor of the heads, 2 or more where the heads allow: TP needs them), 4-12
    blocks, width 128-384 with heads of 32 or 64, sequence 64-160 (multiples of 16), a global batch of :data:`GLOBAL_BATCHES` the world size
    divides, 2, 3 or 4 processes."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        mlp = rng.choice(("gelu", "swiglu"))
        hidden = rng.choice(WIDTHS)
        heads = hidden // rng.choice((32, 64))
        kv_heads = rng.choice([d for d in range(2, heads) if heads % d == 0] or [1])
        ffn = 4 * hidden if mlp == "gelu" else 64 * round(8 * hidden / 3 / 64)
        world = rng.choice(WORLDS)
        shape = {"name": f"random-{seed}-{i}", "layers": rng.randint(4, 12), "hidden": hidden, "heads": heads,
                 "kv_heads": kv_heads, "ffn_hidden": ffn, "vocab": rng.choice((2048, 4096, 8192)),
                 "seq_len": rng.choice(range(64, 161, 16)), "mlp": mlp}
        out.append(Workload(shape, rng.choice([b for b in GLOBAL_BATCHES if b % world == 0]), world))
    return out


def _autoplan(*argv: str) -> None:
    """Run one ``autoplan`` command as the README writes it (this checkout's package); exit on failure."""
    cmd = [sys.executable, "-m", "autoplan.cli", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): autoplan {' '.join(argv)}\n{proc.stderr.strip()[-2000:]}")


CONFIRM_ROUNDS = 3
"""--confirm's default: the chosen layout and those measured faster or at most ``CONFIRM_WITHIN`` slower are
measured again in turn in one job, this many times the steps each"""


def run_workload(w: Workload, workdir: Path, *, top_k: int, steps: int, warmup: int, memory: str,
                 confirm: int = 0, group_jobs: int | None = None) -> tuple[list[Run], list[Run], list[Run] | None, str]:
    """Profile ``w`` as the README says (``memory``: the cluster's --memory-per-device), then validate its
    top ``top_k`` layouts (chosen first). Returns (the runs as validate measured them, the same with the
    contenders measured again in turn in one job, ``confirm`` x ``steps`` steps each:
    :func:`~autoplan.validate.confirm_in_turn`; the same layouts timed in turn again in a second job, which
    judges ``validate --out``'s pick, the fastest of the first job: :func:`judge_pick`; ``None`` where no
    first job ran or the second failed; how far apart the model profile's jobs timed the same steps,
    :func:`~autoplan.execute.group_profile.job_spread_line`, '' where it does not say)."""
    from autoplan.plan.api import make_problem
    from autoplan.validate import validate
    workdir.mkdir(parents=True, exist_ok=True)
    shape, model, cluster = workdir / "shape.json", workdir / "model.json", workdir / "cluster.json"
    shape.write_text(json.dumps(w.shape))
    mbs = ",".join(map(str, w.profiled_mbs()))
    group_jobs = group_jobs or default_group_jobs()
    # each job's profile kept beside the combined one (model-job1.json ..): the profile's noise, job to job
    _autoplan("profile", "model", "--model", str(shape), "--out", str(model), "--mbs", mbs,
              "--nproc", str(w.world), "--group-jobs", str(group_jobs), *(["--keep-jobs"] if group_jobs > 1 else []))
    _autoplan("profile", "cluster", "--nproc", str(w.world), "--memory-per-device", memory, "--out", str(cluster))
    pb = make_problem(str(model), str(cluster), w.global_batch)
    runs = validate(pb, top_k=top_k, steps=steps, warmup=warmup, progress=lambda s: print("  " + s, flush=True))
    say = lambda s: print("  " + s, flush=True)     # noqa: E731
    confirmed = confirm_in_turn(pb, runs, confirm, steps=steps, warmup=warmup, workdir=workdir, progress=say)
    judged = None
    again = in_turn_indices(confirmed)
    if len(again) >= 2:
        say("judge: the same layouts timed in turn again in a second job, for validate --out's pick")
        judged = confirm_in_turn(pb, confirmed, confirm, steps=steps, warmup=warmup, workdir=workdir, progress=say,
                                 indices=again)
        judged = None if judged is confirmed else judged        # the second job failed
    write_json_atomic(workdir / "runs.json", {"workload": asdict(w), "runs": [r.to_dict() for r in runs],
                                              "confirmed": [r.to_dict() for r in confirmed],
                                              **({"judged": [r.to_dict() for r in judged]} if judged else {})})
    return runs, confirmed, judged, job_spread_line(pb.profile, w.world)


@dataclass(frozen=True)
class PickJudged:
    """``validate --out``'s pick and how it and the model's choice fared on the second in-turn job."""

    pick: int
    """index of the pick (0: the model's choice)"""
    excess: float | None
    """the pick's step time over the fastest of the second job, minus 1 (``None``: no second job)"""
    model_excess: float | None
    """the same for the model's choice"""


@dataclass(frozen=True)
class Row:
    """One workload's figures in the report."""

    workload: Workload
    fid: Fidelity
    """judged on the in-turn job (the model's choice against its fastest)"""
    first: Fidelity
    """from the first launches alone"""
    judged: PickJudged
    runs: list[Run]
    wall_s: float
    spread: str = ""
    """how far apart the model profile's jobs timed the same steps (:func:`job_spread_line`), '' where unknown"""


def judge_pick(confirmed: list[Run], judged: list[Run] | None) -> PickJudged:
    """``validate --out``'s pick (:func:`~autoplan.validate.measured_pick`: the fastest of the first in-turn
    job) and how far it and the model's choice are from the fastest of the second job, which the pick was
    not chosen on (the fastest of several noisy medians is biased low, so the first job cannot judge the
    layout it picked)."""
    pick = measured_pick(confirmed)
    pick = 0 if pick is None else pick
    if judged is None:
        return PickJudged(pick, None, None)
    return PickJudged(pick, fidelity(judged, chosen=pick).chosen_vs_fastest, fidelity(judged).chosen_vs_fastest)


def run_random(args) -> None:
    """``--random N``: draw, profile, validate and report (module docstring)."""
    seed = args.seed if args.seed is not None else today_seed()
    work = list(enumerate(draw_workloads(args.random, seed)))
    if args.only:
        keep = {int(x) for x in args.only.split(",")}
        work = [(i, w) for i, w in work if i in keep]
    run_workloads(work, f"--random {args.random} --seed {seed}", args)


def shape_workload(path: Path, global_batch: int, world: int) -> Workload:
    """``--shape FILE``: one workload from a shape file (the fields :func:`draw_workloads` writes)."""
    shape = json.loads(path.read_text())
    shape.setdefault("name", path.stem)
    return Workload(shape, global_batch, world)


def run_workloads(work: list[tuple[int, Workload]], title: str, args) -> None:
    """Profile, validate and report each workload (``--random`` or ``--shape``)."""
    t_start = time.perf_counter()
    print(f"{title}: {len(work)} workloads, validate --top-k {args.top_k}, "
          f"{args.steps} steps after {args.warmup} warm-up; work in {args.workdir}", flush=True)
    rows, all_runs = [], []
    for k, (i, w) in enumerate(work, start=1):
        t0 = time.perf_counter()
        print(f"\n[{k}/{len(work)}] {w.describe()}", flush=True)
        first, runs, judged, spread = run_workload(w, args.workdir / f"w{i}", top_k=args.top_k, steps=args.steps,
                                                   warmup=args.warmup, memory=str(args.memory_per_device),
                                                   confirm=args.confirm, group_jobs=args.group_jobs)
        report(f"{w.shape['name']} (chosen first)", first)
        if runs is not first:
            report(f"{w.shape['name']}, the chosen layout and those measured faster or at most "
                   f"{CONFIRM_WITHIN:.0%} slower timed again in turn in one job "
                   f"({args.confirm} x {args.steps} steps each, median)", runs)
        if judged is not None:
            report(f"{w.shape['name']}, the same layouts timed in turn again in a second job (judges the pick)", judged)
        f = fidelity(runs)
        rows.append(Row(w, f, fidelity(first), judge_pick(runs, judged), runs, time.perf_counter() - t0, spread))
        all_runs += [r for r in runs if r.measured is not None]
    print(f"\n== {title}")
    for row in rows:
        f = row.fid
        print(f"  {row.workload.describe()}: {f.runs} layouts, error {f.time_mape * 100:.1f}%, "
              f"rank {f.rank_correlation:.2f}, chosen {f.chosen_vs_fastest * 100:+.1f}% from the fastest "
              f"({_unpaired(f)}{_once(f, row.first, args.confirm)}), "
              f"memory under by {f.worst_memory_underprediction * 100:.1f}% ({row.wall_s:.0f} s); "
              f"{_pick(row.judged, row.runs)}")
        if row.spread:
            print(f"    the model profile: {row.spread}")
    pooled = fidelity(all_runs)
    print(f"{title} overall: {len(all_runs)} layouts, step-time error {pooled.time_mape * 100:.1f}% (mean abs., max "
          f"{max(abs(r.predicted.step_time_s / r.measured.step_time_s - 1) for r in all_runs) * 100:.1f}%), "
          f"rank correlation {statistics.fmean(r.fid.rank_correlation for r in rows):.2f} (mean of the workloads'), "
          f"chosen within {max(r.fid.chosen_vs_fastest for r in rows) * 100:.1f}% of the fastest measured on every "
          f"workload ({max(r.fid.chosen_vs_fastest_by_medians for r in rows) * 100:.1f}% by the ratio of medians), "
          f"memory under-predicted by at most {pooled.worst_memory_underprediction * 100:.1f}%")
    judged = [r.judged for r in rows if r.judged.excess is not None]
    if judged:
        print(f"{title}: validate --out's pick (the fastest of the first in-turn job) within "
              f"{max(j.excess for j in judged) * 100:.1f}% of the fastest of the second job on every workload that had "
              f"one ({len(judged)} of {len(rows)}; on the same jobs the model's choice within "
              f"{max(j.model_excess for j in judged) * 100:.1f}%)")
    print(f"benchmark wall time {time.perf_counter() - t_start:.0f} s (load average {_load()}); work in {args.workdir}")


def _unpaired(f) -> str:
    """The paired figure's basis, with the ratio of medians beside it, where the choice was timed in turn."""
    if f.chosen_vs_fastest_unpaired is None:
        return ""
    return f"paired by round; {f.chosen_vs_fastest_unpaired * 100:+.1f}% by the medians; "


def _once(f, f1, confirm: int) -> str:
    """What the chosen layout's figure rests on: the first measurements, and the in-turn one where it ran."""
    if not f.in_turn_steps:
        why = f"none within {CONFIRM_WITHIN:.0%}" if confirm else "--confirm 0"
        return f"{f1.chosen_vs_fastest * 100:+.1f}% measured once, not timed in turn ({why})"
    return (f"{f1.chosen_vs_fastest * 100:+.1f}% measured once; {f.in_turn_layouts} layouts timed in turn, "
            f"one layout's steps spread {f.in_turn_spread * 100:.0f}% between quartiles")


def _pick(judge: PickJudged, runs: list[Run]) -> str:
    """What ``validate --out`` would write and how its pick fared in the second in-turn job."""
    which = "the model's choice" if judge.pick == 0 else runs[judge.pick].layout.short()
    if judge.excess is None:
        return f"validate --out writes {which} (no second job)"
    return (f"validate --out writes {which}: {judge.excess * 100:+.1f}% from the fastest of a second job "
            f"(the model's choice {judge.model_excess * 100:+.1f}%)")


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


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


def as_validate(args, steps: int = TIMED_STEPS) -> None:
    """Fill in the steps not given: ``autoplan validate``'s warm-up and, unless ``steps`` says otherwise
    (the fixed sets keep 3), its timed steps. ``--random`` and ``--shape`` measure as validate does (with
    one warm-up step the first timed step ran 1.29x the later ones, median of 60 launches of seed
    20261211 at b7f386c, and the median of three was then the larger of the other two)."""
    args.steps = steps if args.steps is None else args.steps
    args.warmup = WARMUP_STEPS if args.warmup is None else args.warmup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), default="default",
                    help="which workload: the one the model was developed on, or a held-out one")
    ap.add_argument("--model", default=None, help="model spec (default: the set's)")
    ap.add_argument("--global-batch", type=int, default=None, help="default: the set's")
    ap.add_argument("--steps", type=int, default=None,
                    help="timed steps per layout (default: 3; --random and --shape: autoplan validate's, 4)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="untimed steps per layout (default: 2, autoplan validate's)")
    ap.add_argument("--memory-per-device", type=int, default=2**30, help="bytes; large so every layout fits")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where profiles and measurements are written (default: a new temporary folder)")
    ap.add_argument("--alone-only", action="store_true",
                    help="profile layers on one process alone only (the sum-of-parts model), not inside groups")
    ap.add_argument("--reuse", action="store_true",
                    help="re-read the profiles and measurements of an earlier run in --workdir (no new runs)")
    ap.add_argument("--random", type=int, default=None, metavar="N",
                    help="draw N workloads instead of a set (module docstring), validate each with --top-k")
    ap.add_argument("--seed", type=int, default=None, help="--random's seed (default: today's date, YYYYMMDD)")
    ap.add_argument("--top-k", type=int, default=10, help="--random: layouts validated per workload")
    ap.add_argument("--confirm", type=int, default=CONFIRM_ROUNDS, metavar="K",
                    help="--random/--shape: measure the chosen layout and every layout measured faster or at most "
                         f"{CONFIRM_WITHIN * 100:.0f}%% slower again, side by side in one job, K x --steps steps each "
                         "in turn, and judge the choice on the medians of that job (0: one measurement each)")
    ap.add_argument("--only", default=None, help="--random: run only these of the N drawn workloads (0-based, "
                                                 "comma-separated; to re-run one)")
    ap.add_argument("--shape", type=Path, default=None, metavar="FILE",
                    help="one workload from a shape file (needs --global-batch and --world), profiled and validated "
                         "as --random does")
    ap.add_argument("--world", type=int, default=None, help="--shape: processes")
    ap.add_argument("--group-jobs", type=int, default=None, metavar="K",
                    help="profile model --group-jobs K (default: the command's); with --random/--shape above 1, each "
                         "job's profile is kept beside it as model-jobJ.json")
    args = ap.parse_args()
    if args.shape is not None:
        if args.random is not None or args.global_batch is None or args.world is None:
            ap.error("--shape needs --global-batch and --world (and no --random)")
        if not args.shape.is_file():
            ap.error(f"shape file not found: {args.shape}")
        as_validate(args)
        args.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="autoplan-fidelity-shape-"))
        run_workloads([(0, shape_workload(args.shape, args.global_batch, args.world))], f"--shape {args.shape}", args)
        return
    if args.random is not None:
        if args.random < 1 or args.reuse:
            ap.error("--random needs N >= 1 and runs afresh (no --reuse)")
        as_validate(args)
        args.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="autoplan-fidelity-random-"))
        run_random(args)
        return
    as_validate(args, steps=3)
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
                jobs = args.group_jobs or default_group_jobs()
                print(f"profiling {args.model} layers inside groups of {world} processes ({jobs} jobs) ...", flush=True)
                profile_groups_into(prof, GroupProfileConfig(spec=args.model, mbs_list=(1, 2, 4)), world, jobs=jobs)
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
        choice, reused = plan.layout.short(), old.get(str(world), {})
        if choice not in keys and (not args.reuse or choice in reused):
            cands.append((plan.layout, plan.predicted))
            keys.append(choice)
        elif choice not in keys:
            # today's model chooses a layout the reused run did not measure: judge the best predicted of those it did
            print(f"  ({world} processes: the choice {choice} was not measured in the reused run; "
                  "'chosen' below is the best predicted of the measured layouts)")
        chosen[world] = (keys.index(choice) if choice in keys
                         else min(range(len(cands)), key=lambda i: cands[i][1].step_time_s))
        runs = []
        for lay, pred in cands:
            if args.reuse:
                if lay.short() not in reused:
                    raise SystemExit(f"error: --reuse: {lay.short()} on {world} processes was not measured in "
                                     f"{saved} (a run of another set or version); run without --reuse")
                m = Measured.from_dict(reused[lay.short()])
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
    # the calibrated solver's choice, with the fastest measured layout held out of its calibration,
    # measured if it is new
    fastest = {w: min(range(len(rs)), key=lambda i: rs[i].measured.step_time_s) for w, rs in runs_by_world.items()}
    blind = {w: fit_calibration(calibration_runs(runs_by_world, w, leave_out=fastest[w]), Calibration())
             for w in runs_by_world}
    print()
    for w, cal in blind.items():
        print(f"calibration of the {w}-process cluster fitted to its layouts but the fastest "
              f"({runs_by_world[w][fastest[w]].layout.short()}): {cal.summary()}")
    chosen_after = {}
    for w, pb in problems.items():
        pbc = replace(pb, cluster=replace(pb.cluster, calibration=blind[w]))
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
