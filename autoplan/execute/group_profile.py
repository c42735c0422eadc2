"""Measure a model's layers inside real process groups: start a job of local processes, add the
figures it measured to the model profile (what ``autoplan profile model --nproc N`` and ``demo`` do).

What each process of the job measures, and how, is :mod:`autoplan.execute.group_measure`; this module
starts the job (:func:`profile_in_groups`, torchrun on this machine), follows its progress, ends it
when it stalls, and is the worker's entry point::

    torchrun --nproc-per-node 4 -m autoplan.execute.group_profile --model gpt-small --out groups.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Callable

if __name__ == "__main__":     # a signal while torch imports ends the worker quietly (see launch.py)
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

from autoplan.errors import AutoplanError, InputError
from autoplan.execute.group_measure import WHOLE_MODEL, GroupProfileConfig, measure_in_groups, pipeline_splits
from autoplan.execute.pipeline_profile import PIPELINES
from autoplan.profile.formats import GroupTiming, ModelProfile, PipelineTiming

PROGRESS_PREFIX = "autoplan-progress "
"""rank 0 prints ``<prefix>{"done": k, "total": n, "what": ...}`` lines for the parent's progress bar"""


def add_group_timings(profile: ModelProfile, timings: dict[str, list],
                      environment: dict | None = None, *, warn: bool = True) -> ModelProfile:
    """``profile`` with ``timings`` added to its kinds (figures of the same world size replaced); the
    pipeline runs among them replace those of their world size, with the pipeline costs derived
    from them, one per pipeline depth (:func:`autoplan.plan.pipeline_costs.fit_pipeline_costs`).
    ``warn``: say on stderr when a depth's runs contradict each other (off for one job's own profile
    beside the combined one, whose line is the one that counts)."""
    for kind, gts in timings.items():
        if kind == PIPELINES:
            continue
        if kind == WHOLE_MODEL:
            worlds = {g.world for g in gts}
            profile.whole_model_timings = [g for g in profile.whole_model_timings if g.world not in worlds] + list(gts)
            continue
        if kind not in profile.kinds:
            raise InputError(f"group timings name kind {kind!r}, which the model profile does not have")
        worlds = {g.world for g in gts}
        kp = profile.kinds[kind]
        kp.group_timings = [g for g in kp.group_timings if g.world not in worlds] + list(gts)
    if timings.get(PIPELINES):      # after the layers' figures, which the costs are derived against
        from autoplan.plan.pipeline_costs import fit_pipeline_costs, usable
        runs = timings[PIPELINES]
        worlds = {t.world for t in runs}
        profile.pipeline_timings = [t for t in profile.pipeline_timings if t.world not in worlds] + list(runs)
        profile.pipeline_costs = [c for c in profile.pipeline_costs if c.world not in worlds]
        depths = sorted({(t.world, t.pp) for t in runs})
        profile.pipeline_costs += [c for c in (fit_pipeline_costs(profile, w, pp) for w, pp in depths) if c]
        for c in profile.pipeline_costs:
            if warn and c.world in worlds and usable(c) is None:
                print(f"warning: the {c.pp}-stage pipelines measured on {c.world} processes contradict each other "
                      f"(the fit misses one by {c.fit_error:.0%}; was the machine busy?): pipelines are costed "
                      "without them (with another depth's runs where those fit); "
                      "profile the model again on a quieter machine", file=sys.stderr)
    if environment:
        profile.environment.setdefault("group_measurements", []).append(environment)
    return profile


def profile_groups_into(profile: ModelProfile, cfg: GroupProfileConfig, nproc: int, *,
                        progress: Callable[[int, int, str], None] | None = None, jobs: int = 1,
                        job_profiles: list[ModelProfile] | None = None) -> ModelProfile:
    """Measure ``cfg`` inside groups of ``nproc`` local processes ``jobs`` times, each a job of its own
    (:func:`profile_in_groups`), and add the figures to ``profile`` (:func:`add_group_timings`), each the
    median over the jobs (:func:`median_of_jobs`): what ``profile model --nproc`` and ``demo`` do.
    ``job_profiles`` (one per job, ``profile model --keep-jobs``): each also gets its own job's figures
    alone, so how far apart the jobs measured can be read figure by figure (and a layout predicted with
    each job's profile, as ``benchmarks/fidelity.py`` keeps them)."""
    if not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"--group-jobs must be a positive integer, got {jobs!r}")
    if job_profiles is not None and len(job_profiles) != jobs:
        raise ValueError(f"{len(job_profiles)} job profiles for {jobs} jobs")
    measured = measure_jobs(cfg, nproc, jobs, progress=progress)
    for one, (timings, environment) in zip(job_profiles or [], measured):
        add_group_timings(one, copy.deepcopy(timings), environment, warn=False)
    return add_group_timings(profile, *combine_jobs(measured))


def job_profile_path(out: Path, job: int) -> Path:
    """Where ``profile model --out OUT --keep-jobs`` writes job ``job``'s (1-based) own profile:
    ``model.json`` -> ``model-job1.json``."""
    return out.with_name(f"{out.stem}-job{job}{out.suffix}")


def measure_jobs(cfg: GroupProfileConfig, nproc: int, jobs: int, *,
                 progress: Callable[[int, int, str], None] | None = None) -> list[tuple[dict[str, list], dict]]:
    """``jobs`` separate in-group jobs of ``cfg`` (:func:`profile_in_groups`' results, in order). The later
    jobs run the pipelines with the first job's chunks (:func:`~autoplan.execute.group_measure.pipeline_splits`):
    a run is matched across the jobs with its split, and jobs that each balance by their own in-group times
    split differently (on 2026-12-07, 8 blocks on 4 processes: 3,3,3,1 in one job, 3,2,3,2 in two), which left a "median of 3
    jobs" one job's figure (``docs/probes/20261207l``)."""
    first = profile_in_groups(cfg, nproc, progress=_job_progress(progress, 0, jobs))
    later = replace(cfg, chunk_splits=cfg.chunk_splits or pipeline_splits(first[0]))
    return [first] + [profile_in_groups(later, nproc, progress=_job_progress(progress, j, jobs)) for j in range(1, jobs)]


def _job_progress(progress: Callable[[int, int, str], None] | None, job: int, jobs: int):
    """``progress`` of one job (0-based) among ``jobs``, reported over all of them"""
    if progress is None or jobs == 1:
        return progress
    return lambda done, total, what: progress(job * total + done, jobs * total, f"job {job + 1}/{jobs}: {what}")


def combine_jobs(measured: list[tuple[dict[str, list], dict]]) -> tuple[dict[str, list], dict]:
    """(timings, how they were measured) of separate jobs (:func:`profile_in_groups`'s results) as one: each
    figure the median over the jobs (:func:`median_of_jobs`), the first job's record with the jobs' count,
    dates and most foreign load."""
    timings = median_of_jobs([t for t, _ in measured])
    env = dict(measured[0][1])
    n = len(measured)
    if n > 1:
        env.update(jobs=n, statistic=env.get("statistic", "") + f"; median of {n} separate jobs",
                   foreign_cores_max=max(e.get("foreign_cores_max", 0.0) for _, e in measured),
                   dates=[e.get("date") for _, e in measured])
        spread = job_spread([t for t, _ in measured])
        if spread:
            env["job_spread"] = spread
    return timings, env


def job_spread(jobs: list[dict[str, list]]) -> dict | None:
    """How far apart separate jobs timed the same whole steps: for each whole-model case (the sum of its
    figures in seconds) and each pipeline run (``step_s``) that two or more jobs measured, max / min - 1
    over the jobs. Returns ``{"median": ..., "max": ..., "steps": n, "widest": what}`` (None where no step
    was measured twice).

    Why: on processes that share cores the same step runs at different speeds from one job to the next
    (where the OS places the processes, what the host does), and no profile can know which speed a later
    run will meet: step-time errors of that order need not be the cost model's, and ``validate`` and
    ``profile model`` say so (on 2026-12-07 the 16-micro-batch 1F1B pipeline of a 4-process profile took
    0.660, 0.678 and 0.843 s in its three jobs; launched minutes later, 0.729 s, and 0.861 s timed in turn
    with nine other layouts: ``docs/probes/20261207l``)."""
    spreads: dict[tuple[str, tuple], float] = {}
    for kind, step_s in ((WHOLE_MODEL, lambda figs: sum(figs.values())), (PIPELINES, lambda figs: figs["step_s"])):
        for (_, ident), runs in _figures_by_case(jobs, kind).items():
            steps = [step_s(figs) for figs in runs]
            if len(steps) >= 2 and min(steps) > 0:
                spreads[(kind, ident)] = max(steps) / min(steps) - 1.0
    if not spreads:
        return None
    widest = max(spreads, key=spreads.get)
    return {"median": round(statistics.median(spreads.values()), 4), "max": round(spreads[widest], 4),
            "steps": len(spreads), "widest": _describe_step(*widest)}


def _describe_step(kind: str, ident: tuple) -> str:
    """A step case of :func:`job_spread` in words: ``pipeline pp 4 1f1b, 16 x mbs 1`` or ``whole model mbs 4``."""
    case = dict(ident)
    if kind == PIPELINES:
        vp = f" vp {case['vp']}" if case.get("vp", 1) > 1 else ""
        return f"pipeline pp {case['pp']}{vp} {case['schedule']}, {case['num_microbatches']} x mbs {case['mbs']}"
    return f"whole model mbs {case.get('mbs')}"


def job_spread_line(profile: ModelProfile, world: int) -> str:
    """``profile``'s :func:`job_spread` on ``world`` processes in words, from its latest group measurement
    there (whose figures the profile holds), or '' where that has none (one job, or written before
    2026-12-07)."""
    found = [e for e in profile.environment.get("group_measurements", [])
             if isinstance(e, dict) and e.get("world") == world]
    if not found or not isinstance(found[-1].get("job_spread"), dict):
        return ""
    spread, jobs = found[-1]["job_spread"], found[-1].get("jobs", "separate")
    try:
        return (f"its {jobs} jobs timed the same steps a median {float(spread['median']):.0%} apart (up to "
                f"{float(spread['max']):.0%}: {spread['widest']})")
    except (KeyError, TypeError, ValueError):
        return ""


GROUP_JOBS_ON_SHARED_CORES = 3
"""``profile model --group-jobs``'s default where the group's processes are CPU processes: the median of three
jobs (``docs/probes/20261206f``); one job on GPUs, where a rank has its device to itself"""


def default_group_jobs() -> int:
    """Separate in-group jobs ``profile model --nproc`` takes the median of when not told: where the job's
    processes share this machine's cores (no CUDA device: gloo on CPU), :data:`GROUP_JOBS_ON_SHARED_CORES`;
    else 1."""
    import torch
    return 1 if torch.cuda.is_available() else GROUP_JOBS_ON_SHARED_CORES


def _identity_and_figures(timing) -> tuple[type, tuple, dict[str, float]]:
    """(its class, the case it is of: its fields that are not seconds, its figures: its fields in seconds)"""
    ident, figs = [], {}
    for f in fields(timing):
        v = getattr(timing, f.name)
        if f.type in ("float", float):
            figs[f.name] = v
        else:
            ident.append((f.name, v))
    return type(timing), tuple(ident), figs


def _figures_by_case(jobs: list[dict[str, list]], kind: str) -> dict[tuple[type, tuple], list[dict[str, float]]]:
    """Each case of ``kind`` the jobs measured ((class, identity): :func:`_identity_and_figures`), with the
    figures of every job that measured it, in the jobs' order."""
    seen: dict[tuple[type, tuple], list[dict[str, float]]] = {}
    for job in jobs:
        for t in job.get(kind, []):
            cls, ident, figs = _identity_and_figures(t)
            seen.setdefault((cls, ident), []).append(figs)
    return seen


def median_of_jobs(jobs: list[dict[str, list]]) -> dict[str, list]:
    """The timings of several separate jobs that measured the same cases, each figure (every field in
    seconds of a :class:`GroupTiming` or :class:`PipelineTiming`) the median over the jobs that measured
    its case, in the first job's order.

    Why separate jobs: on processes that share cores, a job's figures move together with where the OS
    placed its processes and what else ran; repeats inside one job do not average that out, separate jobs
    do (a layout's prediction moved 4.7-7.5% (sd) from one job's profile to the next on two workloads,
    ``docs/probes/20261206d``, and 1.4-2.4% on six others, ``docs/probes/20261206f``)."""
    if len(jobs) == 1:
        return jobs[0]
    out: dict[str, list] = {}
    for kind, first in jobs[0].items():
        seen = _figures_by_case(jobs, kind)
        merged = []
        for t in first:
            cls, ident, _ = _identity_and_figures(t)
            runs = seen[(cls, ident)]
            merged.append(replace(t, **{k: statistics.median(r[k] for r in runs) for k in runs[0]}))
        out[kind] = merged
    return out


# --------------------------------------------------------------------------------------------
# a job of local processes (torchrun), and the worker entry point
# --------------------------------------------------------------------------------------------

def profile_in_groups(cfg: GroupProfileConfig, nproc: int, *, progress: Callable[[int, int, str], None] | None = None,
                      timeout_s: float = 600.0) -> tuple[dict[str, list], dict]:
    """Start ``nproc`` local processes under torchrun (gloo on CPU, one thread each; NCCL on GPUs),
    measure, and return (the timings per kind, how they were measured). A job that stops making
    progress for ``timeout_s`` seconds is killed (with every process it started) and raises."""
    if not isinstance(nproc, int) or nproc < 1:
        raise InputError(f"--nproc must be a positive integer, got {nproc!r}")
    try:
        return _run_job(cfg, nproc, progress, timeout_s)
    except _JobCrashed as e:
        print(f"warning: {e}; measuring again once", file=sys.stderr)
    try:
        return _run_job(cfg, nproc, progress, timeout_s)
    except _JobCrashed as e:
        raise AutoplanError(str(e)) from None


class _JobCrashed(Exception):
    """A worker died for a reason other than a refusal (gloo connection lost, killed, ...)."""


def _worker_error(errors: list[str], returncode: int) -> str:
    """The first exception a worker printed (``RuntimeError: ...``), not torchrun's summary."""
    found = [e.strip() for e in errors if re.match(r"^\s*(\[rank\d+\]:\s*)?[\w.]*(Error|Exception)\b.*:", e)
             and "ChildFailedError" not in e]
    return found[0] if found else f"exit code {returncode}"


def _run_job(cfg: GroupProfileConfig, nproc: int, progress, timeout_s: float) -> tuple[dict[str, list], dict]:
    with tempfile.TemporaryDirectory(prefix="autoplan-groups-") as tmp:
        out = Path(tmp) / "groups.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "-m", "autoplan.execute.group_profile", "--config", json.dumps(asdict(cfg)), "--out", str(out)]
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        errors: list[str] = []
        try:
            _follow(proc, progress, timeout_s, errors)
        except BaseException:
            _kill_group(proc)
            raise
        if proc.returncode != 0 or not out.exists():
            refusals = [e for e in errors if e.startswith("error:")]
            if refusals:
                raise AutoplanError(refusals[0][len("error:"):].strip())
            raise _JobCrashed(f"measuring in groups of {nproc} processes failed: "
                              f"{_worker_error(errors, proc.returncode)[:300]}")
        d = json.loads(out.read_text())
    timings = {k: [PipelineTiming(**{**g, "chunks": tuple(g["chunks"])}) if k == PIPELINES else GroupTiming(**g)
                   for g in v] for k, v in d["timings"].items()}
    return timings, d["environment"]


def _follow(proc: subprocess.Popen, progress, timeout_s: float, errors: list[str]) -> None:
    """Read the job's output until it ends; progress lines reset the watchdog."""
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    open_streams = 2
    while open_streams:
        if time.monotonic() > deadline:
            _kill_group(proc)
            raise AutoplanError(f"measuring in groups: no progress for {timeout_s:g} s; stopped the job")
        for key, _ in sel.select(timeout=0.5):
            line = key.fileobj.readline()
            if not line:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            if line.startswith(PROGRESS_PREFIX):
                deadline = time.monotonic() + timeout_s
                if progress is not None:
                    ev = json.loads(line[len(PROGRESS_PREFIX):])
                    progress(ev["done"], ev["total"], ev["what"])
            elif key.fileobj is proc.stderr:
                errors.append(line.rstrip())
    proc.wait()


def _kill_group(proc: subprocess.Popen) -> None:
    """End the job and every process it started (it runs in its own session)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _worker(cfg: GroupProfileConfig, out: str | None) -> dict:
    """Inside the job: initialise, measure, (rank 0) write ``out``."""
    import platform
    import socket
    from datetime import datetime, timezone

    import torch
    import torch.distributed as dist

    from autoplan.execute.launch import init_process_group
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    if not dist.is_initialized():
        init_process_group("nccl" if use_cuda else "gloo")
    rank = dist.get_rank()

    def report(done: int, total: int, what: str) -> None:
        if rank == 0:
            print(PROGRESS_PREFIX + json.dumps({"done": done, "total": total, "what": what}), flush=True)
    timings, foreign = measure_in_groups(cfg, device, report)
    environment = {"world": dist.get_world_size(), "backend": dist.get_backend(), "device_type": device.type,
                   "threads_per_process": torch.get_num_threads(), "torch": torch.__version__,
                   "python": platform.python_version(), "hostname": socket.gethostname(),
                   "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   "warmup": cfg.warmup, "repeats": cfg.repeats,
                   "statistic": "median per rank, max over ranks; every rank at once",
                   "foreign_cores_max": round(foreign, 3)}
    result = {"timings": {k: [asdict(g) for g in v] for k, v in timings.items()}, "environment": environment}
    if rank == 0 and out:
        from autoplan.jsonio import write_json_atomic
        write_json_atomic(out, result)
    return result


def config_from_json(text: str) -> GroupProfileConfig:
    """The :class:`GroupProfileConfig` the parent passed as JSON (``asdict``), its lists as tuples."""
    def tuples(v):
        return tuple(tuples(x) for x in v) if isinstance(v, list) else v
    return GroupProfileConfig(**{k: tuples(v) for k, v in json.loads(text).items()})


def main(argv: list[str] | None = None) -> int:
    from autoplan.execute.launch import run_worker
    p = argparse.ArgumentParser(description="measure a model's layers inside real process groups (run under torchrun)")
    p.add_argument("--config", help="GroupProfileConfig as JSON")
    p.add_argument("--model", help="model spec (instead of --config)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.config:
        cfg = config_from_json(args.config)
    elif args.model:
        cfg = GroupProfileConfig(spec=args.model)
    else:
        p.error("--config or --model is required")
    return run_worker(lambda: _worker(cfg, args.out))


if __name__ == "__main__":
    from autoplan.execute.launch import exit_worker
    exit_worker(main())
