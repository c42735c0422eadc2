"""``autoplan validate``: run the chosen plan and alternatives, compare predicted with measured.

Each layout runs for a few steps under torchrun on this machine's processes
(:mod:`autoplan.execute.measure`: median step time after warm-up, peak tensor memory per rank).
``--calibrate`` then fits the cost model's correction factors to the measurements and writes them
into the cluster profile (see :func:`fit_calibration`), so the next ``solve`` predicts better.
"""

from __future__ import annotations

import math
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from autoplan.errors import AutoplanError, InputError
from autoplan.jsonio import read_json
from autoplan.plan.api import Problem, solve_problem
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.cost import evaluate
from autoplan.plan.plan import Layout, Prediction, SolverInfo
from autoplan.plan.search import MAX_TOP_K, SearchOptions, lower_bound_s, outer_layouts, place
from autoplan.processes import run_command
from autoplan.profile.formats import Calibration, ClusterProfile
from autoplan.profile.quiet import FOREIGN_CORES_LIMIT, ForeignLoad, children_cpu_s

TIMED_STEPS = 4
"""steps timed per layout (``autoplan validate --steps``); the figure is their median"""
WARMUP_STEPS = 2
"""untimed steps first (``--warmup``): on CPU processes the step after a single warm-up still ran
1.29x the later ones (median of 60 launches, 0.93-1.76x; fidelity seed 20261211), the one after two 1.02x"""


@dataclass
class Measured:
    step_time_s: float
    peak_memory_bytes: int
    step_times_s: list[float]
    peak_memory_per_rank_bytes: list[int]
    foreign_cores: float = 0.0
    """CPU cores other programs used on average while this was measured (see autoplan.profile.quiet)"""
    in_turn_s: list[float] = field(default_factory=list)
    """where the layout was measured again beside its contenders (:func:`confirm_contenders`): each of
    its steps timed in turn with theirs in one job; ``step_time_s`` is then their median.  Empty when
    measured once"""

    @classmethod
    def from_dict(cls, d: dict) -> "Measured":
        """A measurement as :meth:`Run.to_dict` (or ``dataclasses.asdict``) wrote it; keys this version no
        longer has (``launches_s``, the separate launches of ``--confirm`` until 2026-12-04) are left out."""
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    @property
    def in_turn_spread(self) -> float:
        """the interquartile range of the in-turn steps over their median (0 when measured once): how far
        this layout's step time moves from one step to the next on this machine"""
        if len(self.in_turn_s) < 4:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.in_turn_s, n=4)
        return (q3 - q1) / statistics.median(self.in_turn_s)


@dataclass
class Run:
    layout: Layout
    predicted: Prediction
    measured: Measured | None
    error: str = ""

    def to_dict(self) -> dict:
        out = {"layout": self.layout.to_dict(), "predicted": self.predicted.to_dict(),
               "measured": None if self.measured is None else {
                   "step_time_s": self.measured.step_time_s, "peak_memory_bytes": self.measured.peak_memory_bytes,
                   "step_times_s": self.measured.step_times_s,
                   "peak_memory_per_rank_bytes": self.measured.peak_memory_per_rank_bytes,
                   "foreign_cores": self.measured.foreign_cores,
                   **({"in_turn_s": self.measured.in_turn_s} if self.measured.in_turn_s else {})}}
        if self.error:
            out["error"] = self.error
        return out


def validate_command(model: str, cluster: str, global_batch: int, *, top_k: int, out: str, optimizer: str = "adamw",
                     precision: str | None = None, memory_per_device: str | None = None, confirm: int = 3,
                     seq_len: int | None = None, framework: str = "autoplan") -> list[str] | None:
    """The ``autoplan validate`` command (argv) that times the ``top_k`` best layouts of a solve's problem side by
    side and writes the fastest one's plan to ``out``; None where validate cannot state the problem (a sequence
    length or framework other than the model's own and autoplan's)."""
    if seq_len is not None or framework != "autoplan":
        return None
    argv = ["autoplan", "validate", "--model", model, "--cluster", cluster, "--global-batch", str(global_batch)]
    if optimizer != "adamw":
        argv += ["--optimizer", str(optimizer)]
    if precision is not None:
        argv += ["--precision", str(precision)]
    if memory_per_device is not None:
        argv += ["--memory-per-device", memory_per_device]
    return argv + ["--top-k", str(top_k), "--confirm", str(confirm), "--out", out]


def candidate_layouts(pb: Problem, *, top_k: int | None, all_layouts: bool) -> list[tuple[Layout, Prediction]]:
    """The chosen layout first, then the alternatives (top-k distinct), or every fitting layout."""
    if all_layouts:
        out = []
        for lay in outer_layouts(pb.profile, pb.cluster, pb.train, SearchOptions()):
            costs = layer_costs(pb.profile, pb.cluster, lay, pb.train)
            placed, _, _ = place(pb.profile, pb.cluster, lay, pb.train, costs)
            if placed is None:
                continue
            pred = evaluate(pb.profile, pb.cluster, placed, pb.train, costs)
            if pred.fits:
                out.append((placed, pred))
        out.sort(key=lambda t: t[1].step_time_s)
        return out
    want = max(top_k or 1, 1)
    plan = solve_problem(pb, SearchOptions(top_k=min(want + 4, MAX_TOP_K)))
    seen, out = set(), []
    for lay, pred in [(plan.layout, plan.predicted)] + [(a.layout, a.predicted) for a in plan.alternatives]:
        key = _run_key(lay)
        if pred.fits and lay.stages and key not in seen:
            seen.add(key)
            out.append((lay, pred))
    if len(out) < want:     # few runner-ups (one device: no other families): the next best layouts
        out += next_best_layouts(pb, want - len(out), seen)
    return out[:want]


def _run_key(lay: Layout) -> tuple:
    return (lay.dp, lay.tp, lay.pp, lay.vp, lay.mbs, lay.zero, lay.recompute, lay.schedule)


def next_best_layouts(pb: Problem, need: int, seen: set[tuple]) -> list[tuple[Layout, Prediction]]:
    """The ``need`` fastest fitting layouts whose key is not in ``seen`` (which gains theirs).

    The search keeps only the layouts that can beat its best, so on one device (where the other
    families of layouts do not exist) it often returns the chosen one alone; here outer layouts are
    visited in order of their lower bound and placed until ``need`` are found and the next bound
    exceeds the ``need``-th best predicted time."""
    scored = []
    for lay in outer_layouts(pb.profile, pb.cluster, pb.train, SearchOptions()):
        if _run_key(lay) in seen:
            continue
        costs = layer_costs(pb.profile, pb.cluster, lay, pb.train)
        scored.append((lower_bound_s(costs, lay) + pb.cluster.calibration.step_overhead_s, lay, costs))
    scored.sort(key=lambda t: t[0])
    found: list[tuple[Layout, Prediction]] = []
    for bound, lay, costs in scored:
        if len(found) >= need and bound > found[need - 1][1].step_time_s:
            break
        placed, _, _ = place(pb.profile, pb.cluster, lay, pb.train, costs)
        if placed is None or _run_key(placed) in seen:
            continue
        pred = evaluate(pb.profile, pb.cluster, placed, pb.train, costs)
        if pred.fits:
            found.append((placed, pred))
            found.sort(key=lambda t: t[1].step_time_s)
    chosen = found[:need]
    seen.update(_run_key(lay) for lay, _ in chosen)
    return chosen


def _plan_file(pb: Problem, layout: Layout, predicted: Prediction, path: Path) -> Path:
    plan = pb.plan(layout, predicted, SolverInfo("n/a", 0.0, 0.0, 0.0))
    if plan.training.shape is None:
        raise InputError("validate needs a transformer shape in the model profile to rebuild the model")
    plan.save(path)
    return path


def _launch_measure(plan_paths: list[Path], what: str, *, steps: int, warmup: int, workdir: Path,
                    timeout_s: float) -> tuple[dict, float]:
    """Run :mod:`autoplan.execute.measure` on ``plan_paths`` under torchrun (again after a lost
    rendezvous, or while other programs loaded the machine): (what rank 0 wrote, the foreign cores seen).
    ``what`` names the measurement in the error raised when it fails."""
    from autoplan.execute import measure
    from autoplan.execute.launch import torchrun_command, worker_failure, worker_stderr
    out_path = workdir / "measured.json"
    if out_path.exists():
        out_path.unlink()
    args = ["--plan", *map(str, plan_paths), "--steps", str(steps), "--warmup", str(warmup), "--out", str(out_path)]
    transient_retries = 1       # a local rendezvous can lose a race for its port
    busy_retries = 2            # the machine was busy with other programs: measure again
    attempt = 0
    while True:
        logs = workdir / f"measure-attempt{attempt}-workers"      # each worker's stderr, for its own error
        shutil.rmtree(logs, ignore_errors=True)
        cmd = torchrun_command(plan_paths[0], measure.__file__, args, log_dir=logs)
        load = ForeignLoad().start()
        cpu0 = children_cpu_s()
        proc = run_command(cmd, timeout_s=timeout_s)      # stopped with its workers on a timeout or Ctrl-C
        foreign = load.stop(children_cpu_s() - cpu0)
        workers = "".join(f"--- local rank {r} stderr ---\n{text}" for r, text in sorted(worker_stderr(logs).items()))
        (workdir / f"measure-attempt{attempt}.log").write_text(proc.stdout + proc.stderr + workers)
        attempt += 1
        if proc.returncode == 0 and out_path.exists():
            if foreign <= FOREIGN_CORES_LIMIT or busy_retries == 0:
                break
            busy_retries -= 1
            continue
        refused = [l.strip() for l in (proc.stderr + workers).splitlines() if l.strip().startswith("error:")]
        if refused or transient_retries == 0:
            break                # a refusal (bad plan), not a transient failure
        transient_retries -= 1
    if proc.returncode != 0 or not out_path.exists():
        if refused:
            raise AutoplanError(refused[0])
        raise AutoplanError(f"measuring {what} failed: {worker_failure(logs, proc.stderr, proc.returncode)} "
                            f"(all output: {workdir / f'measure-attempt{attempt - 1}.log'})")
    return read_json(out_path, "measurement"), foreign


def measure_layout(pb: Problem, layout: Layout, predicted: Prediction, *, steps: int, warmup: int,
                   workdir: Path, timeout_s: float = 900) -> Measured:
    """Run ``layout`` under torchrun for ``warmup + steps`` steps and read what it measured."""
    plan_path = _plan_file(pb, layout, predicted, workdir / "plan.json")
    d, foreign = _launch_measure([plan_path], layout.short(), steps=steps, warmup=warmup, workdir=workdir,
                                 timeout_s=timeout_s)
    return Measured(step_time_s=float(d["median_step_time_s"]), peak_memory_bytes=int(d["peak_memory_bytes"]),
                    step_times_s=[float(x) for x in d["step_times_s"]],
                    peak_memory_per_rank_bytes=[int(x) for x in d["peak_memory_per_rank_bytes"]],
                    foreign_cores=round(foreign, 3))


def measure_in_turn(pb: Problem, runs: list[Run], *, steps: int, warmup: int, workdir: Path,
                    timeout_s: float = 900) -> list[list[float]]:
    """The layouts of ``runs`` built side by side in one torchrun job and timed in turn, ``steps`` steps
    each after ``warmup`` (:func:`autoplan.execute.measure.measure_in_turn`): each one's step times.
    On GPUs they must fit in the device's memory together (by their predicted peaks; :class:`InputError`
    if not); CPU processes hold them in host memory, which the cluster's planning budget does not bound."""
    need = sum(r.predicted.peak_memory_bytes for r in runs)
    if pb.cluster.device.type == "cuda" and need > pb.cluster.device.memory_bytes:
        raise InputError(f"{len(runs)} layouts side by side need {need / 2**30:.1f} GiB per device, more than its "
                         f"{pb.cluster.device.memory_bytes / 2**30:.1f} GiB: measured once each")
    paths = [_plan_file(pb, r.layout, r.predicted, workdir / f"plan-in-turn-{i}.json") for i, r in enumerate(runs)]
    d, _ = _launch_measure(paths, f"{len(runs)} layouts in turn", steps=steps, warmup=warmup, workdir=workdir,
                           timeout_s=timeout_s * len(runs))
    return [[float(x) for x in times] for times in d["step_times_s"]]


CONFIRM_WITHIN = 0.30
"""``--confirm`` times again, beside the chosen layout, every layout whose one measurement came within this
fraction of the chosen one's (faster ones all, slower by up to 30%).  Separate launches minutes apart misorder
layouts by the machine's drift: on the 17 workloads of fidelity seeds 20261204 and 20261227-30 that were
confirmed, a contender's launch / in-turn ratio differed from the chosen layout's by up to 28% (seed 20261204,
workload 1), 15-17% on two others.  Until 2026-12-04 only the layouts measured faster were timed again, and a
layout measured 0.5% slower than the chosen once ran 14.9% faster than it in turn (seed 20261230, workload 0)."""


def contenders(runs: list[Run], within: float = CONFIRM_WITHIN) -> list[int]:
    """Indices of the chosen layout (0) and of every layout measured faster than it or at most ``within``
    slower (:data:`CONFIRM_WITHIN`); [] when the chosen one could not be measured."""
    if not runs or runs[0].measured is None:
        return []
    t0 = runs[0].measured.step_time_s
    return [0] + [i for i, r in enumerate(runs[1:], start=1)
                  if r.measured and r.measured.step_time_s <= t0 * (1 + within)]


def confirm_contenders(runs: list[Run], rounds: int, measure_together: Callable[[list[Run], int], list[list[float]]],
                       progress: Callable[[str], None] | None = None, indices: list[int] | None = None) -> list[Run]:
    """``runs`` with the chosen layout and its contenders (:func:`contenders`: every layout measured faster
    than it or within :data:`CONFIRM_WITHIN` of it) measured again side by side: ``measure_together(those
    runs, rounds)`` times them in turn in one job (:func:`measure_in_turn`, ``rounds`` x validate's steps
    each); each one's step time is then the median of its in-turn steps (``Measured.in_turn_s``), and the
    choice is judged among them alone, round by round against the one of the lowest median (:func:`fidelity`,
    :func:`paired_excess`).  The other layouts keep their one measurement.

    Why: every layout is measured once, and the fastest of ten noisy measurements is biased low (the
    least of ten draws), so "the chosen layout is 7% slower than the fastest" can be noise.  Measured
    again in separate launches (round-robin, until 2026-12-04) it stayed noisy: on this 2-core machine
    the same plan's launches spread 0.125-0.145 s, and the machine's speed drifts by 10-20% over minutes
    (fidelity seed 20261226, workload 3, chose `pp4 mbs2x4 1f1b`, 0.135 s on the median of four launches,
    against `pp4 mbs4x2 gpipe`'s 0.126 s; timed in turn in one job the two ran 133 and 134 ms).  In
    one job, one step of each in turn, a drift falls on all of them alike; compared with a layout's launch
    minutes earlier it does not, hence the margin.  ``indices``: time these runs instead of
    :func:`contenders` (a second job over the first one's layouts: :func:`in_turn_indices`)."""
    idx = contenders(runs) if indices is None else indices
    if len(idx) < 2 or rounds < 1:
        return runs
    if progress:
        progress(f"confirm: {len(idx)} layouts measured again in turn in one job ({rounds} rounds)")
    try:
        times = measure_together([runs[i] for i in idx], rounds)
    except (AutoplanError, subprocess.TimeoutExpired) as e:     # the first measurements stand
        if progress:
            progress(f"confirm: failed: {str(e).splitlines()[0]}")
        return runs
    out = list(runs)
    for i, t in zip(idx, times):
        out[i] = replace(runs[i], measured=replace(runs[i].measured, step_time_s=statistics.median(t), in_turn_s=t))
        if progress:
            progress(f"confirm: {runs[i].layout.short()}: {statistics.median(t):.3f} s (median of {len(t)} steps)")
    return out


def confirm_in_turn(pb: Problem, runs: list[Run], rounds: int, *, steps: int, warmup: int, workdir: Path,
                    progress: Callable[[str], None] | None = None, indices: list[int] | None = None) -> list[Run]:
    """:func:`confirm_contenders` with the contenders timed by :func:`measure_in_turn`, ``rounds`` x ``steps``
    steps each after ``warmup``: what ``validate --confirm`` does."""
    return confirm_contenders(
        runs, rounds, lambda rs, k: measure_in_turn(pb, rs, steps=k * steps, warmup=warmup, workdir=workdir), progress,
        indices)


def in_turn_indices(runs: list[Run]) -> list[int]:
    """Indices of the runs timed in turn (``Measured.in_turn_s``), the chosen one first where it was."""
    return [i for i, r in enumerate(runs) if r.measured is not None and r.measured.in_turn_s]


def comparison_pool(runs: list[Run], judged: int = 0) -> list[int]:
    """Indices of the runs the layout ``judged`` is set against: those timed in turn in one job where it was
    (:func:`confirm_contenders`; a layout left out of that job was measured more than :data:`CONFIRM_WITHIN`
    slower than the chosen one), else every run measured."""
    m = runs[judged].measured if runs else None
    return in_turn_indices(runs) if m is not None and m.in_turn_s else \
        [i for i, r in enumerate(runs) if r.measured is not None]


def measured_pick(runs: list[Run]) -> int | None:
    """Index of the layout that ran fastest: among those timed in turn in one job where the chosen layout was
    (:func:`confirm_contenders`), else among all measured once; ``None`` where none was measured.  This is
    what ``validate --out`` writes: where the model prices layouts within its own error of each other (on
    this 2-core machine a layout's predicted / measured ratio spreads some +-5% about its workload's median,
    fidelity seeds of 2026-12-04), a short measurement of the contenders side by side tells them apart
    better than the model can, as tuners that run their candidates do.  The fastest of several noisy
    medians is biased low, so how far the pick is from the best is judged on a second, independent job
    (``benchmarks/fidelity.py``)."""
    pool = comparison_pool(runs)
    return min(pool, key=lambda i: runs[i].measured.step_time_s) if pool else None


def validate(pb: Problem, *, top_k: int | None = 3, all_layouts: bool = False, steps: int = TIMED_STEPS,
             warmup: int = WARMUP_STEPS,
             progress: Callable[[str], None] | None = None, min_layouts: int = 0, confirm: int = 0) -> list[Run]:
    """Predicted against measured for the chosen layout and alternatives (chosen is runs[0]).

    ``min_layouts``: refuse, before running anything, where fewer layouts fit the memory budget
    (``--calibrate`` needs :data:`MIN_CALIBRATION_RUNS`).  ``confirm``: time the chosen layout and every
    layout measured faster or at most :data:`CONFIRM_WITHIN` slower again, in turn in one job, this many
    times ``steps`` steps each (:func:`confirm_contenders`)."""
    if steps < 1 or warmup < 0:
        raise InputError("--steps must be >= 1 and --warmup >= 0")
    if confirm < 0:
        raise InputError("--confirm must be >= 0")
    if pb.cluster.source == "catalogue":
        raise InputError("validate runs on this machine: give a measured cluster profile (autoplan profile cluster)")
    if pb.cluster.world_size > 64:
        raise InputError(f"validate runs every layout on this machine; {pb.cluster.world_size} processes is too many")
    cands = candidate_layouts(pb, top_k=top_k, all_layouts=all_layouts)
    budget = f"{pb.cluster.device.memory_bytes / 2**20:.0f} MiB per device"
    if len(cands) < min_layouts:
        raise InputError(f"--calibrate needs {min_layouts} layouts that fit, and only {len(cands)} fit in {budget}: "
                         "give validate a larger --memory-per-device (it changes what runs, not the cluster profile)")
    if progress and not all_layouts and len(cands) < max(top_k or 1, 1):
        progress(f"only {len(cands)} layouts fit in {budget} (asked for {top_k})")
    runs = []
    with tempfile.TemporaryDirectory(prefix="autoplan-validate-") as tmp:
        for i, (lay, pred) in enumerate(cands):
            if progress:
                progress(f"[{i + 1}/{len(cands)}] {lay.short()}")
            try:
                m = measure_layout(pb, lay, pred, steps=steps, warmup=warmup, workdir=Path(tmp))
                runs.append(Run(lay, pred, m))
            except (AutoplanError, subprocess.TimeoutExpired) as e:
                runs.append(Run(lay, pred, None, error=str(e).splitlines()[0]))
        runs = confirm_in_turn(pb, runs, confirm, steps=steps, warmup=warmup, workdir=Path(tmp), progress=progress)
    return runs


# --------------------------------------------------------------------------------------------
# fidelity figures and calibration
# --------------------------------------------------------------------------------------------

def write_measured_pick(pb: Problem, runs: list[Run], path: Path) -> str:
    """Write the plan of :func:`measured_pick` to ``path`` (``validate --out``); the line that says what it is."""
    i = measured_pick(runs)
    if i is None:
        raise InputError(f"no layout could be measured: {path} not written")
    r, chosen = runs[i], runs[0]
    pb.plan(r.layout, r.predicted, SolverInfo("measured: the fastest layout validate ran", r.predicted.step_time_s,
                                              r.predicted.step_time_s, 0.0)).save(path)
    how = "in turn" if r.measured.in_turn_s else "measured once each"
    if i == 0:
        return f"wrote {path}: {r.layout.short()}, the model's choice, also the fastest measured ({r.measured.step_time_s:.3f} s, {how})"
    slower = (f"ran {chosen.measured.step_time_s:.3f} s, {chosen.measured.step_time_s / r.measured.step_time_s - 1:+.1%}"
              if chosen.measured else "could not be measured")
    return (f"wrote {path}: {r.layout.short()}, the fastest measured ({r.measured.step_time_s:.3f} s, {how}; predicted "
            f"{r.predicted.step_time_s:.3f} s); the model's choice {chosen.layout.short()} {slower}")


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else 0.0


@dataclass
class Fidelity:
    runs: int
    time_mape: float
    """mean absolute percentage error of step time"""
    rank_correlation: float
    chosen_vs_fastest: float
    """measured time of the chosen layout over the fastest measured, minus 1; where the chosen layout was timed
    again in turn (:func:`confirm_contenders`), against the fastest of that one job (the lowest median; the
    layouts left out of it were measured more than :data:`CONFIRM_WITHIN` slower than the chosen one), paired
    by round (:func:`paired_excess`; may be below 0 where the chosen one ran faster in most rounds)"""
    worst_memory_underprediction: float
    """max over runs of (measured - predicted) / measured, 0 if never under-predicted"""
    in_turn_spread: float = 0.0
    """largest ``Measured.in_turn_spread`` of the runs measured again in turn (0 if none was): the
    machine's own timing noise, which a ``chosen_vs_fastest`` below it cannot be told from"""
    in_turn_steps: int = 0
    """steps behind each confirmed layout's median (0: every layout measured once)"""
    in_turn_layouts: int = 0
    """layouts timed in turn in that one job, the chosen one included (0: none)"""
    chosen_vs_fastest_unpaired: float | None = None
    """the chosen layout's median over the fastest one's, minus 1, as judged until 2026-12-07 (``None``
    where the two were not timed in turn in one job: then it is ``chosen_vs_fastest``)"""

    @property
    def chosen_vs_fastest_by_medians(self) -> float:
        """the chosen layout against the fastest by the ratio of their medians, paired or not"""
        return self.chosen_vs_fastest if self.chosen_vs_fastest_unpaired is None else self.chosen_vs_fastest_unpaired


def paired_excess(a: Measured, b: Measured) -> float | None:
    """How much slower ``a`` ran than ``b`` where both were timed in turn in one job (:func:`measure_in_turn`
    steps each plan once per round, so their k-th steps fall seconds apart): the median over rounds of
    a's step over b's, minus 1; ``None`` where they were not (no in-turn steps, or not as many).

    Why paired: on this 2-core machine the whole machine slows and speeds up from one round to the next
    (two layouts' log steps correlate +0.28 over the rounds of one job, median over 150 stored jobs), which
    the ratio of two medians keeps and the ratio of each round cancels.  Over 75 stored workloads timed in
    two independent in-turn jobs, the chosen layout's excess over the fastest moved 1.82 points between the
    jobs paired against 2.29 unpaired, and the verdict at 5% agreed on 66 against 62
    (``docs/probes/20261207k``, pre-registered)."""
    if not a.in_turn_s or len(a.in_turn_s) != len(b.in_turn_s):
        return None
    return statistics.median(x / y for x, y in zip(a.in_turn_s, b.in_turn_s)) - 1.0


def fidelity(runs: list[Run], chosen: int = 0) -> Fidelity:
    """The figures of ``runs``; ``chosen``: the index of the layout judged against the fastest (the
    solver's choice, runs[0], unless another pick is judged: :func:`measured_pick`)."""
    ok = [r for r in runs if r.measured is not None]
    if not ok:
        raise InputError("no layout could be measured")
    pt = [r.predicted.step_time_s for r in ok]
    mt = [r.measured.step_time_s for r in ok]
    mape = statistics.fmean(abs(p - m) / m for p, m in zip(pt, mt))
    pick = runs[chosen].measured
    f = min(comparison_pool(runs, chosen), key=lambda i: runs[i].measured.step_time_s)
    fastest = runs[f].measured
    unpaired = (pick.step_time_s if pick else math.inf) / fastest.step_time_s - 1.0
    paired = None if pick is None else 0.0 if f == chosen else paired_excess(pick, fastest)
    under = max(max(0.0, (r.measured.peak_memory_bytes - r.predicted.peak_memory_bytes) / r.measured.peak_memory_bytes)
                for r in ok)
    return Fidelity(runs=len(ok), time_mape=mape, rank_correlation=spearman(pt, mt) if len(ok) > 1 else 1.0,
                    chosen_vs_fastest=unpaired if paired is None else paired, worst_memory_underprediction=under,
                    in_turn_spread=max(r.measured.in_turn_spread for r in ok),
                    in_turn_steps=max(len(r.measured.in_turn_s) for r in ok), in_turn_layouts=len(in_turn_indices(runs)),
                    chosen_vs_fastest_unpaired=None if paired is None else unpaired)


def choice_verdict(f: Fidelity) -> str:
    """One line on the chosen layout against the fastest measured, with the machine's timing noise
    where the contenders were measured more than once."""
    line = f"chosen is {f.chosen_vs_fastest * 100:+.1f}% from the fastest measured"
    if f.in_turn_steps:
        line += " (round by round; "
        if f.chosen_vs_fastest_unpaired is not None and f.chosen_vs_fastest_unpaired > 0:
            line += f"{f.chosen_vs_fastest_unpaired * 100:+.1f}% by the two medians; "
        line += (f"it and the {f.in_turn_layouts - 1} measured faster or at most {CONFIRM_WITHIN:.0%} slower, timed "
                 f"again in turn in one job, medians of {f.in_turn_steps} steps; one "
                 f"layout's steps spread {f.in_turn_spread * 100:.0f}% between quartiles on this machine")
        line += ("; within that noise)" if 0 < f.chosen_vs_fastest <= f.in_turn_spread else ")")
    return line


MIN_CALIBRATION_RUNS = 4
"""the fewest measured layouts a calibration is fitted to"""

CALIBRATION_RIDGE = 0.05
"""weight of the prior that every calibration scale is 1 (the measured profile is right), against
the squared relative errors of the runs: a scale moves away from 1 only as far as the runs pay for
it, so a term that a few runs barely inform cannot swing (out of sample) to x15"""


def calibration_terms(runs: list["Run"]) -> list[str]:
    """The terms a calibration fits to ``runs``: compute, one TP-communication term per TP degree
    that at least two runs inform (``tp_comm@t``; the other degrees share ``tp_comm``), pipeline
    sends, data-parallel synchronisation, and a per-step overhead."""
    per_degree: dict[int, int] = {}
    for r in runs:
        if r.predicted.breakdown_s.get("tp_comm", 0) > 0:
            per_degree[r.layout.tp] = per_degree.get(r.layout.tp, 0) + 1
    own = sorted(t for t, n in per_degree.items() if n >= 2)
    shared = any(n < 2 for n in per_degree.values())
    return (["compute"] + [f"tp_comm@{t}" for t in own] + (["tp_comm"] if shared else [])
            + ["pp_p2p", "dp_sync", "overhead"])


def _raw_terms(r: "Run", current: Calibration, names: list[str]) -> list[float]:
    """A run's predicted terms with ``current`` undone, in the order of ``names``."""
    b = r.predicted.breakdown_s
    out = []
    for n in names:
        if n == "compute":
            comp = b.get("compute", 0) + b.get("recompute", 0) + b.get("bubble", 0) + b.get("optimizer", 0)
            out.append(comp / current.compute_scale)
        elif n.startswith("tp_comm"):
            t = int(n.split("@")[1]) if "@" in n else None
            mine = (t == r.layout.tp) if t is not None else f"tp_comm@{r.layout.tp}" not in names
            out.append(b.get("tp_comm", 0) / current.tp_scale(r.layout.tp) if mine else 0.0)
        elif n == "pp_p2p":
            out.append(b.get("pp_p2p", 0) / current.comm_scale)
        elif n == "dp_sync":
            out.append(b.get("dp_sync", 0) / current.dp_sync_scale)
        else:
            out.append(1.0)
    return out


def fit_calibration(runs: list[Run], current: Calibration, *, ridge: float = CALIBRATION_RIDGE) -> Calibration:
    """Fit the cost model's correction factors to measured runs (relative error, non-negative)::

        measured ≈ compute_scale * (compute + recompute + bubble + optimizer)
                   + tp_scale(t) * tp_comm + comm_scale * pp_p2p + dp_sync_scale * dp_sync
                   + step_overhead_s

    against the raw terms (the current calibration undone); ``tp_scale(t)`` is fitted per TP degree
    where at least two runs have that degree (:func:`calibration_terms`). Each run weighs
    1/measured (relative error, so fast layouts count as much as slow ones), and a prior of weight
    ``ridge`` holds every scale near 1 (:data:`CALIBRATION_RIDGE`). The bubble is idle compute time,
    so it scales with compute. Memory: the per-device overhead that makes no run under-predicted.
    A scale the runs cannot inform (its term is zero in every run) stays 1."""
    ok = [r for r in runs if r.measured is not None]
    if len(ok) < MIN_CALIBRATION_RUNS:
        raise InputError(f"calibration needs at least {MIN_CALIBRATION_RUNS} measured layouts, got {len(ok)}")
    names = calibration_terms(ok)
    rows, ys = [], []
    for r in ok:
        w = 1.0 / r.measured.step_time_s
        rows.append(tuple(x * w for x in _raw_terms(r, current, names)))
        ys.append(1.0)
    informed = [any(row[k] > 0 for row in rows) for k in range(len(names))]
    prior = math.sqrt(ridge)
    for k, n in enumerate(names):            # the prior: scale k is 1 (the overhead: 0)
        if n != "overhead" and informed[k] and prior > 0:
            rows.append(tuple(prior if j == k else 0.0 for j in range(len(names))))
            ys.append(prior)
    x = dict(zip(names, _nnls(rows, ys)))
    scale = {n: (x[n] if informed[k] and x[n] > 0 else 1.0) for k, n in enumerate(names)}
    mem_gap = max(r.measured.peak_memory_bytes - (r.predicted.peak_memory_bytes - current.memory_overhead_bytes)
                  for r in ok)
    return replace(current, compute_scale=scale["compute"], tp_comm_scale=scale.get("tp_comm", 1.0),
                   tp_comm_scale_by_degree={int(n.split("@")[1]): v for n, v in scale.items() if "@" in n},
                   comm_scale=scale["pp_p2p"], dp_sync_scale=scale["dp_sync"],
                   step_overhead_s=x["overhead"], memory_overhead_bytes=max(0, int(mem_gap)), runs=len(ok))


def calibrate_cluster_file(runs: list[Run], path: str | Path, current: Calibration) -> Calibration:
    """Fit the calibration to ``runs`` (:func:`fit_calibration`, starting from ``current``) and write
    it into the cluster profile file ``path`` (``validate --calibrate``)."""
    cal = fit_calibration(runs, current)
    prof = ClusterProfile.load(path)
    prof.calibration = cal
    prof.save(path)
    return cal


def _nnls(rows: list[tuple[float, ...]], ys: list[float]) -> tuple[float, ...]:
    """Non-negative least squares by trying every active set (exact; a handful of unknowns)."""
    import itertools
    k = len(rows[0])
    best, best_err = (0.0,) * k, math.inf
    for mask in itertools.product((0, 1), repeat=k):
        idx = [i for i in range(k) if mask[i]]
        if not idx:
            continue
        A = [[sum(r[i] * r[j] for r in rows) for j in idx] for i in idx]
        bvec = [sum(r[i] * y for r, y in zip(rows, ys)) for i in idx]
        sol = _solve(A, bvec)
        if sol is None or any(x < 0 for x in sol):
            continue
        x = [0.0] * k
        for i, v in zip(idx, sol):
            x[i] = v
        err = sum((sum(x[i] * r[i] for i in range(k)) - y) ** 2 for r, y in zip(rows, ys))
        if err < best_err:
            best, best_err = tuple(x), err
    return best


def _solve(A: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None if singular."""
    n = len(b)
    M = [row[:] + [bb] for row, bb in zip(A, b)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(M[r][col]))
        if abs(M[piv][col]) < 1e-300:
            return None
        M[col], M[piv] = M[piv], M[col]
        for r in range(n):
            if r != col:
                f = M[r][col] / M[col][col]
                for k in range(col, n + 1):
                    M[r][k] -= f * M[col][k]
    return [M[i][n] / M[i][i] for i in range(n)]


def print_table(runs: list[Run], out=sys.stdout) -> None:
    print(f"{'':2}{'layout':<58} {'pred_s':>8} {'meas_s':>8} {'err':>7} {'pred_MiB':>9} {'meas_MiB':>9}", file=out)
    for i, r in enumerate(runs):
        mark = "*" if i == 0 else " "
        if r.measured is None:
            print(f"{mark} {r.layout.short():<58} {r.predicted.step_time_s:>8.3f}  failed: {r.error}", file=out)
            continue
        err = (r.predicted.step_time_s - r.measured.step_time_s) / r.measured.step_time_s
        busy = (f"  (busy machine: other programs used {r.measured.foreign_cores:.2f} cores)"
                if r.measured.foreign_cores > FOREIGN_CORES_LIMIT else "")
        if r.measured.in_turn_s:
            busy += (f"  (in turn: median of {len(r.measured.in_turn_s)} steps, {min(r.measured.in_turn_s):.3f}-"
                     f"{max(r.measured.in_turn_s):.3f} s)")
        print(f"{mark} {r.layout.short():<58} {r.predicted.step_time_s:>8.3f} {r.measured.step_time_s:>8.3f} "
              f"{err * 100:>+6.1f}% {r.predicted.peak_memory_bytes / 2**20:>9.1f} "
              f"{r.measured.peak_memory_bytes / 2**20:>9.1f}{busy}", file=out)
