"""Bad input ends with one clear line on stderr and exit code 2: no traceback, no output file.

The commands run in this process (tests/cli_utils.py); tests/test_cli_usage.py runs the installed script."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from cli_utils import run_cli
from planner_instances import random_cluster, random_model_profile


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert lines[0].startswith("error: ")
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture
def files(tmp_path):
    rng = random.Random(7)
    prof = random_model_profile(rng, n_blocks=3)            # 5 layers, heads from the rng
    prof.shape["heads"] = prof.shape["kv_heads"] = 4
    model = tmp_path / "model.json"
    prof.save(model)
    cluster = tmp_path / "cluster.json"
    random_cluster(rng, world=4, memory_bytes=2**30).save(cluster)
    big = tmp_path / "cluster8.json"
    random_cluster(rng, world=8, memory_bytes=2**30).save(big)
    return tmp_path, model, cluster, big


def solve_args(model, cluster, out, *extra):
    return ["solve", "--model", str(model), "--cluster", str(cluster), "--global-batch", "8", "--out", str(out), *extra]


def test_solve_works_on_good_input(files):
    tmp, model, cluster, _ = files
    out = tmp / "plan.json"
    proc = run_cli(*solve_args(model, cluster, out))
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(out.read_text())
    assert plan["schema_version"] == 1 and plan["layout"]["stages"]
    assert {"step_time_s", "peak_memory_bytes", "breakdown_s"} <= set(plan["predicted"])
    assert {"status", "objective", "bound", "wall_s"} <= set(plan["solver"])


def test_missing_profile(files):
    tmp, model, _, _ = files
    out = tmp / "plan.json"
    assert_one_line_error(run_cli(*solve_args(model, tmp / "nope.json", out)), "not found")
    assert not out.exists()


def test_missing_model_and_profile_named_together(files):
    tmp, _, _, _ = files
    out = tmp / "plan.json"
    assert_one_line_error(run_cli(*solve_args(tmp / "nomodel.json", tmp / "nocluster.json", out)),
                          "model file not found", "nomodel.json", "cluster profile file not found", "nocluster.json")
    assert not out.exists()


def test_malformed_json(files):
    tmp, _, cluster, _ = files
    bad = tmp / "bad.json"
    bad.write_text('{"schema_version": 1, "kind": "model_profile", ')
    out = tmp / "plan.json"
    assert_one_line_error(run_cli(*solve_args(bad, cluster, out)), "not valid JSON")
    assert not out.exists()


def test_malformed_profile_fields(files):
    tmp, model, cluster, _ = files
    d = json.loads(cluster.read_text())
    del d["device"]["memory_bytes"]
    bad = tmp / "badcluster.json"
    bad.write_text(json.dumps(d))
    assert_one_line_error(run_cli(*solve_args(model, bad, tmp / "p.json")), "malformed cluster profile")


def test_wrong_schema_version(files):
    tmp, model, cluster, _ = files
    d = json.loads(model.read_text())
    d["schema_version"] = 99
    bad = tmp / "v99.json"
    bad.write_text(json.dumps(d))
    assert_one_line_error(run_cli(*solve_args(bad, cluster, tmp / "p.json")), "schema_version")


@pytest.mark.parametrize("layout,needle", [
    ("dp=3", "does not divide"),
    ("tp=3", "does not divide"),
    ("zero=7", "zero"),
    ("bogus=1", "unknown key"),
])
def test_layout_that_does_not_divide(files, layout, needle):
    tmp, model, cluster, _ = files
    out = tmp / "plan.json"
    assert_one_line_error(run_cli(*solve_args(model, cluster, out, "--layout", layout)), needle)
    assert not out.exists()


def test_tp_not_dividing_heads(files):
    tmp, model, _, big = files
    d = json.loads(model.read_text())
    d["model"]["shape"]["heads"] = d["model"]["shape"]["kv_heads"] = 2
    m2 = tmp / "model2.json"
    m2.write_text(json.dumps(d))
    assert_one_line_error(run_cli(*solve_args(m2, big, tmp / "p.json", "--layout", "tp=4")), "heads")


def test_more_stages_than_layers(files):
    tmp, model, _, big = files   # 5 layers, 8 devices
    assert_one_line_error(run_cli(*solve_args(model, big, tmp / "p.json", "--layout", "pp=8")), "layers")


def test_estimate_bad_layout(files):
    tmp, model, cluster, _ = files
    proc = run_cli("estimate", "--model", str(model), "--cluster", str(cluster), "--global-batch", "8",
                   "--layout", "dp=2,tp=1,pp=1")
    assert_one_line_error(proc, "does not match the cluster's 4 devices")


def test_model_fits_nowhere(files):
    tmp, model, cluster, _ = files
    out = tmp / "plan.json"
    proc = run_cli(*solve_args(model, cluster, out, "--memory-per-device", "64KiB"))
    assert_one_line_error(proc, "fits nowhere", "needs", "per device")
    assert not out.exists()


def test_run_rejects_malformed_plan(files, tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps({"schema_version": 1, "kind": "plan", "layout": {"dp": 2}}))
    assert_one_line_error(run_cli("run", str(bad), "--", "examples/train_gpt.py"), "plan")
    assert_one_line_error(run_cli("run", str(tmp_path / "missing.json"), "--", "x.py"), "not found")


def test_run_names_an_option_it_does_not_have(tmp_path):
    """``autoplan run plan.json --nproc 3``: the plan sets the processes; the message says so, not 'script not found'."""
    proc = run_cli("run", str(tmp_path / "plan.json"), "--nproc", "3", "--", "examples/train_gpt.py")
    assert_one_line_error(proc, "no option --nproc", "autoplan run PLAN [OPTIONS] -- SCRIPT")


def test_run_names_a_plan_option_it_does_not_have(tmp_path):
    """``autoplan run --plan plan.json -- train.py`` (as export takes it): not 'plan file not found: --plan'."""
    proc = run_cli("run", "--plan", str(tmp_path / "plan.json"), "--", "examples/train_gpt.py")
    assert_one_line_error(proc, "no option --plan", "the plan is its first argument")


def test_unknown_model_name(files):
    tmp, _, cluster, _ = files
    assert_one_line_error(run_cli(*solve_args("gpt-nonexistent", cluster, tmp / "p.json")), "unknown model")


def test_a_cuda_cluster_is_not_planned_with_this_machines_cpu_times(tmp_path):
    """A measured CUDA cluster profile with a built-in model on a machine without CUDA: the model would
    be measured on the CPU and its times taken for the GPUs' (a 1.3B model's step predicted at 283 s on
    an H200's profile). One line, exit 2, with the command that measures it where the GPUs are."""
    from autoplan.profile.hardware import catalogue_cluster
    cl = catalogue_cluster("dgx-h200-141gb:1").to_dict()
    cl.update(source="measured", num_nodes=1, devices_per_node=1, world_size=1, rank_hosts=["vm"])
    cl["device"].update(type="cuda", name="NVIDIA H200")
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(cl))
    assert_one_line_error(run_cli("solve", "--model", "gpt-tiny", "--cluster", str(path), "--global-batch", "8"),
                          "no CUDA", "autoplan profile model --device cuda")


def test_an_fp8_plan_is_refused_before_torchrun_starts(tmp_path):
    """`autoplan run` of an fp8 plan where fp8 cannot train: one line from autoplan, exit 2, before
    torchrun starts workers (which each refused it, and torchrun added its own failure report)."""
    plan = tmp_path / "plan.json"
    r = run_cli("solve", "--model", "gpt-tiny", "--cluster", "dgx-h100-80gb:1", "--precision", "fp8",
                "--global-batch", "8", "--out", str(plan))
    assert r.returncode == 0, r.stderr
    assert_one_line_error(run_cli("run", str(plan), "--", "examples/train_gpt.py", "--steps", "1"),
                          "fp8 training needs a CUDA GPU")


def test_profile_model_in_fp8_says_how_fp8_is_planned(tmp_path):
    """`profile model --precision fp8` (a choice its help lists) is not measured yet: the line says how fp8
    is planned instead, where it said "unknown precision 'fp8' (known: fp32, bf16, fp16)"."""
    out = tmp_path / "m.json"
    assert_one_line_error(run_cli("profile", "model", "--model", "gpt-tiny", "--precision", "fp8", "--out", str(out)),
                          "not measured in fp8 yet", "--precision fp8")
    assert not out.exists()


def test_group_jobs_without_nproc_is_refused_before_measuring(tmp_path):
    """`profile model --group-jobs 3` without --nproc would repeat nothing: one line, before the layers are timed."""
    out = tmp_path / "m.json"
    assert_one_line_error(run_cli("profile", "model", "--model", "gpt-tiny", "--group-jobs", "3", "--out", str(out)),
                          "--group-jobs", "give --nproc N")
    assert not out.exists()


def test_a_measured_profile_planned_in_fp8_is_not_told_to_measure_fp8(files):
    """A measured bf16/fp32 profile with --precision fp8: the line does not send the user to `profile model
    --precision fp8`, which refuses; it says how fp8 is planned."""
    tmp, model, cluster, _ = files
    gpus = json.loads(cluster.read_text())
    gpus["device"].update(type="cuda", name="NVIDIA H200")           # a measured H200 cluster
    (tmp / "h200.json").write_text(json.dumps(gpus))
    assert_one_line_error(run_cli("solve", "--model", str(model), "--cluster", str(tmp / "h200.json"),
                                  "--global-batch", "8", "--precision", "fp8"), "not measured in fp8 yet",
                          "catalogue cluster")


def test_an_output_path_that_is_a_directory(files):
    """Where a file to write names a directory: one line, exit 2, the directory untouched. The commands that
    measure for minutes check it before they start; every other writer in the atomic write itself."""
    tmp, model, cluster, _ = files
    where = tmp / "plans"
    where.mkdir()
    proc = run_cli("solve", "--model", str(model), "--cluster", str(cluster), "--global-batch", "8", "--out", str(where))
    assert_one_line_error(proc, f"--out {where} is a directory; give the plan file to write, e.g. {where / 'plan.json'}")
    for argv in (["profile", "model", "--model", "gpt-tiny", "--out", str(where)],
                 ["profile", "cluster", "--nproc", "2", "--out", str(where)],
                 ["profile", "--model", "gpt-tiny", "--nproc", "2", "--model-out", str(where)]):
        assert_one_line_error(run_cli(*argv), f"{where} is a directory")
    from autoplan.errors import InputError
    from autoplan.jsonio import write_json_atomic
    with pytest.raises(InputError, match=f"^{where} is a directory; give the file to write"):
        write_json_atomic(where, {"a": 1})
    assert list(where.iterdir()) == [] and not [p for p in tmp.iterdir() if p.name.startswith(".")]   # no temp file
