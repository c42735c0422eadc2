"""``solve`` says when runner-ups are predicted too close to the chosen layout for the cost model to tell apart,
with the ``autoplan validate`` command that times them side by side; not for catalogue clusters."""

from __future__ import annotations

import json
import random
import shlex
from dataclasses import replace

import pytest

from cli_utils import run_cli
from planner_instances import random_cluster, random_model_profile
from autoplan.plan.explain import CLOSE_CALL_FRACTION, close_calls
from autoplan.plan.plan import Alternative, Plan


@pytest.fixture
def solved(tmp_path):
    rng = random.Random(7)
    prof = random_model_profile(rng, n_blocks=3)
    prof.shape["heads"] = prof.shape["kv_heads"] = 4
    model, cluster, out = tmp_path / "model.json", tmp_path / "cluster.json", tmp_path / "plan.json"
    prof.save(model)
    random_cluster(rng, world=4, memory_bytes=2**30).save(cluster)
    proc = run_cli("solve", "--model", str(model), "--cluster", str(cluster), "--global-batch", "8", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return model, cluster, Plan.load(out), proc.stdout


def with_step_times(plan: Plan, factors: list[float], fits: list[bool]) -> Plan:
    """``plan`` with alternatives (its own layout at other micro-batch counts, for distinct layouts) predicted at
    ``factors`` x its step time."""
    t = plan.predicted.step_time_s
    alts = [Alternative(layout=replace(plan.layout, num_microbatches=plan.layout.num_microbatches + 1 + k),
                        predicted=replace(plan.predicted, step_time_s=t * f, fits=ok))
            for k, (f, ok) in enumerate(zip(factors, fits))]
    return replace(plan, alternatives=alts)


def test_close_calls_keeps_fitting_layouts_within_the_band_closest_first(solved):
    _, _, plan, _ = solved
    edge = 1.0 + CLOSE_CALL_FRACTION
    probe = with_step_times(plan, [1.04, 1.01, 1.01, edge * 1.001], [True, True, False, True])
    near = close_calls(probe)
    assert [round(a.predicted.step_time_s / plan.predicted.step_time_s, 4) for a in near] == [1.01, 1.04]
    assert close_calls(with_step_times(plan, [1.2, 1.3], [True, True])) == []


def test_solve_prints_the_close_call_and_a_validate_command_validate_accepts(solved, capsys):
    import typer.main

    from autoplan.cli import app
    from autoplan.cli.plan import print_close_call
    from autoplan.validate import validate_command
    model, cluster, plan, _ = solved

    def command(top_k):
        return validate_command(str(model), str(cluster), 8, top_k=top_k, out="plan.json", optimizer="sgd",
                                memory_per_device="1GiB")
    print_close_call(with_step_times(plan, [1.02, 1.03, 1.5], [True, True, True]), command)
    out = capsys.readouterr().out
    assert "close call 2 other layouts predicted within 3.0% of this one" in out, out
    cmd = shlex.split(out.split("keep the fastest:", 1)[1].strip())
    assert cmd[:2] == ["autoplan", "validate"] and cmd[cmd.index("--top-k") + 1] == "3"
    assert cmd[cmd.index("--optimizer") + 1] == "sgd" and cmd[cmd.index("--memory-per-device") + 1] == "1GiB"
    assert cmd[cmd.index("--out") + 1] == "plan.json" and cmd[cmd.index("--model") + 1] == str(model)
    validate = typer.main.get_command(app).commands["validate"]
    known = {o for p in validate.params for o in p.opts}
    assert {a for a in cmd[2:] if a.startswith("--")} <= known
    # nothing near: nothing printed; a problem validate cannot state: the line without the command
    print_close_call(with_step_times(plan, [1.2], [True]), command)
    assert capsys.readouterr().out == ""
    print_close_call(with_step_times(plan, [1.01], [True]), lambda k: None)
    out = capsys.readouterr().out
    assert "close call 1 other layout predicted within 1.0%" in out and "autoplan validate" not in out
    assert validate_command("m", "c", 8, top_k=2, out="p.json", seq_len=128) is None
    assert validate_command("m", "c", 8, top_k=2, out="p.json", framework="megatron") is None


def test_solve_on_a_catalogue_cluster_says_no_close_call(tmp_path):
    out = tmp_path / "plan.json"
    proc = run_cli("solve", "--model", "gpt-tiny", "--cluster", "dgx-a100-80gb:2", "--global-batch", "32",
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    plan = Plan.load(out)
    assert close_calls(plan), "the instance should have runner-ups within the band, else this test shows nothing"
    assert "close call" not in proc.stdout
    assert json.loads(out.read_text())["layout"]
