"""``profile model --group-jobs K``: in-group figures as the median of K separate jobs."""

import pytest

import autoplan.execute.group_profile as gp
from autoplan.execute.group_measure import WHOLE_MODEL
from autoplan.execute.pipeline_profile import PIPELINES
from autoplan.profile.formats import GroupTiming, PipelineTiming


def _job(scale: float, with_tp: bool = True) -> dict[str, list]:
    """One job's timings: a block alone and under TP 2, the whole model, one pipeline; every figure x scale."""
    block = [GroupTiming(world=2, mbs=1, forward_s=1.0 * scale, backward_s=2.0 * scale, optimizer_s=0.1 * scale)]
    if with_tp:
        block.append(GroupTiming(world=2, mbs=1, tp=2, forward_s=0.6 * scale, backward_s=1.2 * scale))
    return {"block": block,
            WHOLE_MODEL: [GroupTiming(world=2, mbs=2, forward_s=3.0 * scale, backward_sync_s=7.0 * scale)],
            PIPELINES: [PipelineTiming(world=2, pp=2, vp=1, schedule="1f1b", num_microbatches=4, mbs=1,
                                       chunks=(2, 2), step_s=5.0 * scale, reference_s=4.0 * scale)]}


def test_median_of_jobs_takes_each_figure_median_per_case():
    got = gp.median_of_jobs([_job(1.0), _job(1.3), _job(0.9)])
    assert [g.tp for g in got["block"]] == [1, 2]                  # the first job's cases, in its order
    alone, tp2 = got["block"]
    assert (alone.forward_s, alone.backward_s, alone.optimizer_s) == (1.0, 2.0, 0.1)
    assert tp2.forward_s == 0.6 and tp2.mbs == 1 and tp2.world == 2
    assert got[WHOLE_MODEL][0].backward_sync_s == 7.0 and got[WHOLE_MODEL][0].mbs == 2
    pipe = got[PIPELINES][0]
    assert (pipe.step_s, pipe.reference_s, pipe.chunks, pipe.num_microbatches) == (5.0, 4.0, (2, 2), 4)


def test_median_of_jobs_one_job_as_it_is_and_a_missing_case_from_the_others():
    one = _job(1.7)
    assert gp.median_of_jobs([one]) is one
    got = gp.median_of_jobs([_job(1.0), _job(2.0, with_tp=False), _job(1.2)])
    assert got["block"][1].forward_s == pytest.approx(0.6 * 1.1)      # the two jobs that measured TP 2
    assert got["block"][0].forward_s == 1.2


def test_profile_groups_into_runs_separate_jobs_and_says_so(monkeypatch, tmp_path):
    """The plumbing of ``jobs``: each job a call of its own, progress over all of them, the median added."""
    from autoplan.execute.group_measure import GroupProfileConfig
    from autoplan.profile.formats import ModelProfile
    calls, seen = [], []
    scales = iter([1.0, 3.0, 1.1])

    def fake_job(cfg, nproc, progress=None):
        calls.append((nproc, cfg.chunk_splits))
        progress(1, 2, "block")
        s = next(scales)
        return _job(s), {"world": nproc, "date": f"d{s}", "foreign_cores_max": s / 10, "statistic": "median"}
    monkeypatch.setattr(gp, "profile_in_groups", fake_job)
    monkeypatch.setattr(gp, "add_group_timings", lambda p, t, env: (p, t, env))
    prof = ModelProfile.__new__(ModelProfile)
    _, timings, env = gp.profile_groups_into(prof, GroupProfileConfig(spec="gpt-tiny"), 2, jobs=3,
                                             progress=lambda d, t, w: seen.append((d, t, w)))
    assert calls == [(2, ()), (2, ((2, 2),)), (2, ((2, 2),))]      # the later jobs run the first job's chunks
    assert [(d, t) for d, t, _ in seen] == [(1, 6), (3, 6), (5, 6)] and seen[1][2] == "job 2/3: block"
    assert timings["block"][0].forward_s == 1.1
    assert env["jobs"] == 3 and env["dates"] == ["d1.0", "d3.0", "d1.1"] and env["foreign_cores_max"] == 0.3
    assert "median of 3 separate jobs" in env["statistic"]
    with pytest.raises(Exception, match="--group-jobs must be a positive integer"):
        gp.profile_groups_into(prof, GroupProfileConfig(spec="gpt-tiny"), 2, jobs=0)


def test_a_job_runs_the_pipelines_with_the_splits_it_is_given():
    """A later job times the first job's chunks, whatever its own in-group times would balance to; a
    chunk count the splits do not name is balanced by its own times, and the worker reads the splits
    back from the JSON its parent passes it."""
    import json
    from dataclasses import asdict

    from autoplan.execute import group_measure as gm
    first = {PIPELINES: [PipelineTiming(world=4, pp=4, vp=1, schedule="1f1b", num_microbatches=4, mbs=1,
                                        chunks=(3, 3, 3, 1), step_s=1.0, reference_s=1.0),
                         PipelineTiming(world=4, pp=4, vp=1, schedule="1f1b", num_microbatches=16, mbs=1,
                                        chunks=(3, 3, 3, 1), step_s=2.0, reference_s=1.0),
                         PipelineTiming(world=4, pp=2, vp=1, schedule="1f1b", num_microbatches=2, mbs=1,
                                        chunks=(5, 5), step_s=1.0, reference_s=1.0)]}
    splits = gm.pipeline_splits(first)
    assert splits == ((5, 5), (3, 3, 3, 1))
    cfg = gm.GroupProfileConfig(spec="gpt-tiny", chunk_splits=splits)
    unit_s = [1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 3.0]       # balanced alone: 3,2,3,2 over 4 chunks
    assert gm._split(gm.GroupProfileConfig(spec="gpt-tiny"), unit_s, 4) == (3, 2, 3, 2)
    assert gm._split(cfg, unit_s, 4) == (3, 3, 3, 1)
    assert gm._split(cfg, unit_s, 8) == gm.balanced_chunks(unit_s, 8)
    assert gm._split(gm.GroupProfileConfig(spec="gpt-tiny"), None, 4) is None
    assert gp.config_from_json(json.dumps(asdict(cfg))) == cfg
    plain = gm.GroupProfileConfig(spec="gpt-tiny", mbs_list=(1, 2), tp_list=None)
    assert gp.config_from_json(json.dumps(asdict(plain))) == plain


def test_default_is_three_jobs_on_cpu_processes_one_on_gpus(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gp.default_group_jobs() == gp.GROUP_JOBS_ON_SHARED_CORES == 3
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert gp.default_group_jobs() == 1


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_readme_command_takes_the_median_of_three_jobs(gpt_tiny_profiles_2proc):
    """``autoplan profile --model M --nproc 2`` with no --group-jobs: three separate jobs on CPU, recorded."""
    from autoplan.profile.formats import ModelProfile
    env = ModelProfile.load(gpt_tiny_profiles_2proc[0]).environment["group_measurements"]
    assert len(env) == 1 and env[0]["jobs"] == 3 and len(env[0]["dates"]) == 3
    assert env[0]["statistic"].endswith("median of 3 separate jobs")
    spread = env[0]["job_spread"]                      # the whole model's steps and the pipelines', job to job
    assert spread["steps"] >= 3 and spread["max"] >= spread["median"] >= 0.0


def test_job_spread_is_how_far_apart_the_jobs_timed_the_same_steps():
    from dataclasses import replace
    jobs = [_job(1.0), _job(1.3), _job(0.9)]
    jobs[2][PIPELINES] = [replace(jobs[2][PIPELINES][0], step_s=6.0)]       # the pipeline: 5.0, 6.5, 6.0 s
    got = gp.job_spread(jobs)
    assert got["steps"] == 2                                     # the whole model's step and the pipeline's
    assert got["max"] == pytest.approx(13 / 9 - 1, abs=1e-4)     # the whole model: 10, 13, 9 s
    assert got["widest"] == "whole model mbs 2"
    assert got["median"] == pytest.approx((13 / 9 - 1 + 6.5 / 5.0 - 1) / 2, abs=1e-4)
    assert gp.job_spread([_job(1.0)]) is None                    # one job: nothing to compare
    assert gp.job_spread([{"block": _job(1.0)["block"]}, {"block": _job(2.0)["block"]}]) is None   # no whole step


def test_combine_jobs_keeps_the_spread_and_the_line_says_it():
    from types import SimpleNamespace
    jobs = [_job(1.0), _job(1.1), _job(1.0)]
    jobs[1][WHOLE_MODEL] = _job(1.3)[WHOLE_MODEL]
    _, env = gp.combine_jobs([(j, {"world": 2, "date": "d"}) for j in jobs])
    assert env["job_spread"]["widest"] == "whole model mbs 2" and env["jobs"] == 3
    line = gp.job_spread_line(SimpleNamespace(environment={"group_measurements": [env]}), 2)
    assert line == "its 3 jobs timed the same steps a median 20% apart (up to 30%: whole model mbs 2)"
    assert gp.job_spread_line(SimpleNamespace(environment={"group_measurements": [env]}), 4) == ""   # other world
    old = {k: v for k, v in env.items() if k != "job_spread"}                                       # before 2026-12-07
    assert gp.job_spread_line(SimpleNamespace(environment={"group_measurements": [old]}), 2) == ""
    assert gp.combine_jobs([(jobs[0], {"world": 2})])[1] == {"world": 2}                           # one job: as it was
    again = {"world": 2, "date": "later"}              # measured again in one job: its figures replaced the three jobs'
    assert gp.job_spread_line(SimpleNamespace(environment={"group_measurements": [env, again]}), 2) == ""


def test_the_repeats_help_says_how_many_samples_the_groups_take():
    """``--repeats`` sets the figures measured alone; the help says what the in-group figures take instead
    (GroupProfileConfig's default), so that number cannot drift from the code."""
    import typer.main

    from autoplan.cli import app
    from autoplan.execute.group_measure import GroupProfileConfig
    profile = typer.main.get_command(app).commands["profile"]
    helps = [next(p.help for p in cmd.params if p.name == "repeats")
             for cmd in (profile, profile.commands["model"])]
    assert all(f"take {GroupProfileConfig(spec='gpt-tiny').repeats}" in h for h in helps), helps
