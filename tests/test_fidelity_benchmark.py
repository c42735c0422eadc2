"""benchmarks/fidelity.py: which measured layouts calibrate which cluster (pure; nothing is run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "fidelity.py"


@pytest.fixture(scope="module")
def fb():
    spec = importlib.util.spec_from_file_location("fidelity_benchmark", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fidelity_benchmark"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_cluster_is_calibrated_on_its_own_layouts_but_the_one_left_out(fb):
    runs = {4: [f"4-{i}" for i in range(6)], 2: [f"2-{i}" for i in range(3)]}
    assert fb.calibration_runs(runs, 4) == runs[4]
    got = fb.calibration_runs(runs, 4, leave_out=2)
    assert got == ["4-0", "4-1", "4-3", "4-4", "4-5"] and len(got) >= fb.MIN_CALIBRATION_RUNS


def test_a_cluster_with_too_few_layouts_borrows_the_machines_others(fb):
    runs = {4: [f"4-{i}" for i in range(5)], 2: [f"2-{i}" for i in range(4)]}
    got = fb.calibration_runs(runs, 2, leave_out=0)          # 3 own left: below the minimum
    assert got[:3] == ["2-1", "2-2", "2-3"] and set(got[3:]) == set(runs[4])
    assert "2-0" not in got
    assert fb.calibration_runs(runs, 4, leave_out=4) == runs[4][:4]   # exactly the minimum: its own only


def test_random_workloads_are_drawn_from_the_seed_within_the_issue_ranges(fb):
    from autoplan.models.shapes import ModelShape
    work = fb.draw_workloads(40, 7)
    assert work == fb.draw_workloads(40, 7) and work != fb.draw_workloads(40, 8)
    for w in work:
        sh = ModelShape.from_dict(w.shape)
        assert 4 <= sh.layers <= 12 and 128 <= sh.hidden <= 384 and 64 <= sh.seq_len <= 160
        assert sh.kv_heads < sh.heads or sh.heads == 1                      # grouped-query attention
        assert w.world in (2, 3, 4) and w.global_batch % w.world == 0
    assert {w.shape["mlp"] for w in work} == {"gelu", "swiglu"} and {w.world for w in work} == {2, 3, 4}
    assert 20200101 <= fb.today_seed() <= 21000101


@pytest.mark.parametrize("name,layers,hidden", [("issue24-192x6", 6, 192), ("issue24-160x8", 8, 160)])
def test_issue_24s_shapes_are_the_issues(fb, name, layers, hidden):
    from autoplan.models.shapes import ModelShape
    w = fb.shape_workload(_PATH.parent / "shapes" / f"{name}.json", 16, 4)
    sh = ModelShape.from_dict(w.shape)
    assert (sh.layers, sh.hidden, w.global_batch, w.world) == (layers, hidden, 16, 4) and w.shape["name"] == name


def test_a_workload_profiles_the_micro_batch_its_data_parallel_layout_runs(fb):
    """A size pure data parallel may choose (global batch / processes) is timed, not extrapolated:
    seed 20261207's 2-process misses chose mbs 4 x 2 over an unmeasured mbs 8 x 1 that ran faster."""
    shape = {"name": "w"}
    assert fb.Workload(shape, 16, 2).profiled_mbs() == [1, 2, 4, 8]
    assert fb.Workload(shape, 12, 2).profiled_mbs() == [1, 2, 4, 6]
    assert fb.Workload(shape, 16, 4).profiled_mbs() == [1, 2, 4]       # the walkthrough's own case
    assert fb.Workload(shape, 8, 4).profiled_mbs() == [1, 2, 4]


def test_random_and_shape_measure_with_validates_steps(fb):
    """--random/--shape time as ``autoplan validate`` does (one warm-up step left the next 1.29x slow)."""
    import argparse

    from autoplan.validate import TIMED_STEPS, WARMUP_STEPS
    args = argparse.Namespace(steps=None, warmup=None)
    fb.as_validate(args)
    assert (args.steps, args.warmup) == (TIMED_STEPS, WARMUP_STEPS) == (4, 2)
    args = argparse.Namespace(steps=3, warmup=1)                       # given: kept
    fb.as_validate(args)
    assert (args.steps, args.warmup) == (3, 1)


def test_the_validate_command_defaults_are_validates_named_steps():
    """`autoplan validate`'s option defaults are literals (importing autoplan.validate at start-up costs
    0.3 s); they must stay what the library and the benchmark use."""
    import typer.main

    from autoplan.cli import app
    from autoplan.validate import TIMED_STEPS, WARMUP_STEPS
    cmd = typer.main.get_command(app).commands["validate"]
    defaults = {p.name: p.default for p in cmd.params}
    assert (defaults["steps"], defaults["warmup"]) == (TIMED_STEPS, WARMUP_STEPS)


def test_the_benchmark_profiles_with_the_command_and_keeps_the_jobs(fb, monkeypatch, tmp_path):
    """``benchmarks/fidelity.py`` profiles a workload with the README's command, each job's profile kept
    (``--keep-jobs``) for its per-job comparisons, instead of running the later jobs itself."""
    calls = []

    class Stop(Exception):
        pass

    def fake_autoplan(*argv):
        calls.append(argv)
        raise Stop
    monkeypatch.setattr(fb, "_autoplan", fake_autoplan)
    w = fb.draw_workloads(1, 7)[0]
    with pytest.raises(Stop):
        fb.run_workload(w, tmp_path, top_k=10, steps=4, warmup=2, memory="1GiB", group_jobs=3)
    argv = calls[0]
    assert argv[:2] == ("profile", "model") and argv[argv.index("--group-jobs") + 1] == "3" and "--keep-jobs" in argv
    assert json.loads((tmp_path / "shape.json").read_text()) == w.shape
    calls.clear()
    with pytest.raises(Stop):
        fb.run_workload(w, tmp_path, top_k=10, steps=4, warmup=2, memory="1GiB", group_jobs=1)
    assert "--keep-jobs" not in calls[0] and calls[0][calls[0].index("--group-jobs") + 1] == "1"
