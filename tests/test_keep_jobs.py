"""``profile model --keep-jobs``: each in-group job's own profile written beside the combined one."""

from __future__ import annotations

from pathlib import Path

import pytest

import autoplan.execute.group_profile as gp
from autoplan.execute.group_measure import WHOLE_MODEL
from autoplan.execute.pipeline_profile import PIPELINES
from autoplan.profile.formats import GroupTiming, ModelProfile, PipelineTiming
from cli_utils import run_cli
from test_cli_bad_input import assert_one_line_error


def _job(scale: float, world: int) -> dict[str, list]:
    """One job's figures for gpt-tiny's kinds (embed, 4 blocks, head) on ``world`` processes, every figure x
    ``scale``; one 2-stage pipeline run."""
    def figures(fwd_s: float) -> list[GroupTiming]:
        return [GroupTiming(world=world, mbs=1, forward_s=fwd_s * scale, backward_s=2 * fwd_s * scale)]
    return {"embed": figures(1e-4), "block": figures(1e-3), "head": figures(5e-4),
            WHOLE_MODEL: [GroupTiming(world=world, mbs=1, forward_s=4.6e-3 * scale, backward_s=9.2e-3 * scale)],
            PIPELINES: [PipelineTiming(world=world, pp=2, vp=1, schedule="1f1b", num_microbatches=2, mbs=1,
                                       chunks=(3, 3), step_s=2e-2 * scale, reference_s=1.4e-2 * scale)]}


@pytest.fixture
def three_jobs(monkeypatch):
    """``profile_in_groups`` replaced by three jobs at scales 1, 3 and 2 (the median is job 3's), recording the
    splits each job was given."""
    scales, splits = iter([1.0, 3.0, 2.0]), []

    def fake_job(cfg, nproc, progress=None):
        splits.append(cfg.chunk_splits)
        s = next(scales)
        return _job(s, nproc), {"world": nproc, "date": f"d{s:g}", "statistic": "median"}
    monkeypatch.setattr(gp, "profile_in_groups", fake_job)
    return splits


def _block_forward_s(path: Path) -> float:
    return ModelProfile.load(str(path)).kinds["block"].group_timing(1, world=2).forward_s


def test_each_job_profile_holds_its_own_figures_and_the_out_file_their_median(three_jobs, tmp_path):
    out = tmp_path / "model.json"
    proc = run_cli("profile", "model", "--model", "gpt-tiny", "--mbs", "1", "--repeats", "1", "--warmup", "0",
                   "--nproc", "2", "--group-jobs", "3", "--keep-jobs", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "each job's own profile in model-job1.json .. model-job3.json" in proc.stdout
    assert [_block_forward_s(tmp_path / f"model-job{j}.json") for j in (1, 2, 3)] == pytest.approx([1e-3, 3e-3, 2e-3])
    assert _block_forward_s(out) == pytest.approx(2e-3)
    runs = [ModelProfile.load(str(tmp_path / f"model-job{j}.json")).pipeline_timings for j in (1, 2, 3)]
    assert [r[0].step_s for r in runs] == pytest.approx([2e-2, 6e-2, 4e-2])       # each its own job's run
    assert all(ModelProfile.load(str(tmp_path / f"model-job{j}.json")).pipeline_costs for j in (1, 2, 3))
    assert three_jobs == [(), ((3, 3),), ((3, 3),)]          # the later jobs ran the first job's chunks
    dates = [ModelProfile.load(str(tmp_path / f"model-job{j}.json")).environment["group_measurements"][-1]["date"]
             for j in (1, 2, 3)]
    assert dates == ["d1", "d3", "d2"]
    assert ModelProfile.load(str(out)).environment["group_measurements"][-1]["jobs"] == 3


def test_without_keep_jobs_no_job_files_are_written(three_jobs, tmp_path):
    out = tmp_path / "model.json"
    proc = run_cli("profile", "model", "--model", "gpt-tiny", "--mbs", "1", "--repeats", "1", "--warmup", "0",
                   "--nproc", "2", "--group-jobs", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.json"]


def test_keep_jobs_without_nproc_is_refused_before_measuring(tmp_path):
    out = tmp_path / "m.json"
    assert_one_line_error(run_cli("profile", "model", "--model", "gpt-tiny", "--keep-jobs", "--out", str(out)),
                          "--keep-jobs", "give --nproc N")
    assert not out.exists()


def test_the_one_command_profile_passes_keep_jobs_on(three_jobs, monkeypatch, tmp_path):
    """``autoplan profile --model M --nproc N --keep-jobs`` (both profiles) keeps the model's jobs too."""
    import autoplan.profile.links as links
    monkeypatch.setattr(links, "measure_cluster", lambda *a, **k: None)     # a torchrun worker's answer: nothing written
    proc = run_cli("profile", "--model", "gpt-tiny", "--nproc", "2", "--mbs", "1", "--repeats", "1",
                   "--group-jobs", "3", "--keep-jobs", "--model-out", str(tmp_path / "m.json"),
                   "--cluster-out", str(tmp_path / "c.json"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m-job1.json", "m-job2.json", "m-job3.json", "m.json"]


def test_a_contradicting_fit_is_warned_about_once_for_the_combined_profile(monkeypatch, tmp_path):
    """Runs whose fit contradicts itself are warned about on the combined profile only: the jobs' own
    profiles beside it carry the same fit error in their files, without three more lines."""
    def contradicting_job(cfg, nproc, progress=None):
        job = _job(1.0, nproc)
        run = job[PIPELINES][0]
        job[PIPELINES].append(PipelineTiming(world=nproc, pp=2, vp=1, schedule="1f1b", num_microbatches=8, mbs=1,
                                             chunks=run.chunks, step_s=run.step_s, reference_s=run.reference_s))
        return job, {"world": nproc, "date": "d", "statistic": "median"}
    monkeypatch.setattr(gp, "profile_in_groups", contradicting_job)
    out = tmp_path / "model.json"
    proc = run_cli("profile", "model", "--model", "gpt-tiny", "--mbs", "1", "--repeats", "1", "--warmup", "0",
                   "--nproc", "2", "--group-jobs", "3", "--keep-jobs", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("pipelines measured on 2 processes contradict each other") == 1, proc.stderr
    assert all(ModelProfile.load(str(tmp_path / f"model-job{j}.json")).pipeline_costs[0].fit_error > 0.25
               for j in (1, 2, 3))
