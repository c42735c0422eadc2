"""Multi-process jobs shared by test files: one spawned job per process count for the whole session.

Starting gloo processes (each imports torch and autoplan) costs seconds per process on 2 cores, more
than most of these jobs' training. A test module lists its jobs in ``SHARED_JOBS``::

    SHARED_JOBS = {"cases_4": (4, cases_worker, (CASES_4, None), 200)}   # name: (processes, worker, args, timeout_s)

(``args`` may be a function of a fresh temporary directory, called once, when the job runs or when
``shared_jobs.args(...)`` first asks for what it returns) and reads a job's per-rank results with
``shared_jobs.get(__name__, "cases_4")``. The first ``get`` for
a process count runs the jobs of that count of every module collected in this session, in turn, in one
spawned job (:func:`dist_utils.run_jobs_on_ranks`); a failure is reported to every test that reads it
(a job whose ``args`` function raised only to that job's tests: the others run without it).
"""

from __future__ import annotations

import traceback
from typing import Any

import pytest


class SharedJobs:
    """The ``SHARED_JOBS`` of the collected test modules, run once per process count."""

    def __init__(self, modules: list[Any], tmp_path_factory: pytest.TempPathFactory):
        self.tmp_path_factory = tmp_path_factory
        self.jobs: dict[int, dict[tuple[str, str], tuple]] = {}
        for module in modules:
            for name, (world, worker, args, timeout_s) in getattr(module, "SHARED_JOBS", {}).items():
                self.jobs.setdefault(world, {})[(module.__name__, name)] = (worker, args, timeout_s)
        self.results: dict[int, dict | str] = {}
        self.failed: dict[tuple[str, str], str] = {}
        self.given: dict[tuple[str, str], tuple] = {}

    def get(self, module: str, name: str) -> list[Any]:
        """Each rank's return value of the job ``name`` of ``module``."""
        from dist_utils import DistributedTestError, run_jobs_on_ranks

        world = self._world(module, name)
        if world not in self.results:
            jobs = self.jobs[world]
            runnable, unprepared = {}, {}
            for k, (fn, _, _) in jobs.items():
                try:
                    runnable[k] = (fn, self.args(*k))
                except Exception:       # reported to the job's own tests; the other jobs still run
                    unprepared[k] = f"making the arguments of the shared job {k} failed:\n{traceback.format_exc()}"
            try:
                self.results[world] = run_jobs_on_ranks(runnable, world, timeout_s=sum(t for _, _, t in jobs.values()))
                self.failed.update(unprepared)
            except DistributedTestError as e:
                self.results[world] = f"the shared {world}-process job {sorted(runnable)} failed: {e}"
        got = self.results[world]
        if isinstance(got, str):
            raise DistributedTestError(got)
        if (module, name) in self.failed:
            raise DistributedTestError(self.failed[module, name])
        return got[(module, name)]

    def _world(self, module: str, name: str) -> int:
        return next(w for w, jobs in self.jobs.items() if (module, name) in jobs)

    def args(self, module: str, name: str) -> tuple:
        """The arguments the job ``name`` of ``module`` runs with (a function's made on the first call)."""
        key = (module, name)
        if key not in self.given:
            _, args, _ = self.jobs[self._world(module, name)][key]
            self.given[key] = args(self.tmp_path_factory.mktemp(name)) if callable(args) else args
        return self.given[key]


@pytest.fixture(scope="session")
def shared_jobs(request, tmp_path_factory) -> SharedJobs:
    modules = {id(m): m for m in (getattr(item, "module", None) for item in request.session.items) if m is not None}
    return SharedJobs(list(modules.values()), tmp_path_factory)


GROUP_SAMPLES_IN_TESTS = {"repeats": 3, "min_sample_s": 0.02}
"""the in-group samples of :func:`gpt_tiny_profiles_2proc`: 3 of at least 20 ms each, where ``profile model``
measures 7 of at least 100 ms (``GroupProfileConfig``): a job's measurement in 2-4 s instead of 11-14 s (the
job's start-up, ~5 s, stays). The tests read the profile's cases, its three jobs and what validate, solve and
the cost model make of it, never how precise its figures are."""


@pytest.fixture(scope="session")
def gpt_tiny_profiles_2proc(tmp_path_factory):
    """The README's one profiling command for gpt-tiny on 2 processes (``autoplan profile``: ``profile model
    --nproc 2``, the model alone and in groups of 2 in three separate jobs, then ``profile cluster --nproc 2``),
    run once for the session's tests that read it (test_validate, test_group_profile, test_group_jobs,
    test_memory_moments), in this process (``cli_utils.run_cli``) with the in-group samples shortened
    (:data:`GROUP_SAMPLES_IN_TESTS`; the profile records them). Returns (model.json, cluster.json)."""
    import functools

    import autoplan.execute.group_profile as group_profile
    from autoplan.profile.formats import ModelProfile
    from cli_utils import run_cli

    root = tmp_path_factory.mktemp("gpt-tiny-2proc")
    model, cluster = root / "model.json", root / "cluster.json"
    with pytest.MonkeyPatch.context() as mp:     # the config `profile model --nproc` builds for its jobs
        mp.setattr(group_profile, "GroupProfileConfig",
                   functools.partial(group_profile.GroupProfileConfig, **GROUP_SAMPLES_IN_TESTS))
        proc = run_cli("profile", "--model", "gpt-tiny", "--nproc", "2", "--mbs", "1,2", "--repeats", "2",
                       "--memory-per-device", "256MiB", "--max-size", "64KiB", "--model-out", str(model),
                       "--cluster-out", str(cluster))
    assert proc.returncode == 0, proc.stderr
    measured = ModelProfile.load(model).environment["group_measurements"]
    assert [m["repeats"] for m in measured] == [GROUP_SAMPLES_IN_TESTS["repeats"]], measured   # shortened indeed
    return model, cluster


@pytest.fixture(scope="session")
def gpt_tiny_profile(tmp_path_factory):
    """gpt-tiny's layers measured in this process (micro-batches 1, 2, 4; 2 repeats), once for the session's
    tests that solve a plan from a fresh profile (test_elastic, test_interrupts). Returns its model.json."""
    from autoplan.profile.layers import profile_model

    out = tmp_path_factory.mktemp("gpt-tiny") / "model.json"
    profile_model("gpt-tiny", mbs_list=(1, 2, 4), repeats=2, warmup=1).save(out)
    return out
