"""``benchmarks/gpu_check.sh`` end to end on CPU (its dry-run mode), so that everything but CUDA itself
is proven here: a bf16 profile at TP shard degrees 1 and 2, the one-device cluster profile, solve,
``validate --top-k 3`` on one process, ``autoplan run`` with ``examples/train_gpt.py``, and the report
(JSON and markdown) with the layer-by-layer comparison against the analytic H200 profile.

    python -m pytest tests/test_gpu_check_dry_run.py -q
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def gpu_check(env: dict[str, str], root: Path) -> subprocess.Popen:
    """``benchmarks/gpu_check.sh`` started in ``root`` with ``env``, its output in root/stdout and root/stderr."""
    with open(root / "stdout", "w") as out, open(root / "stderr", "w") as err:
        return subprocess.Popen(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], env={**os.environ, **env},
                                stdout=out, stderr=err, text=True, cwd=root)


@pytest.fixture(scope="module")
def failing_check(tmp_path_factory):
    """The check with a model that does not exist, started when the module's first test asks for it and run
    beside that test (its stages are one process at a time; the machine has 2 cores): (process, its folder)."""
    root = tmp_path_factory.mktemp("gpu-check-failing")
    proc = gpu_check({"GPU_CHECK_MODEL": "no-such-model", "DEVICE": "cpu", "GPU_CHECK_TP": "1", "GPU_CHECK_MBS": "1",
                      "GPU_CHECK_BUDGET": "64MiB", "OUT": str(root / "out"), "PYTHON": sys.executable,
                      "TMPDIR": str(root)}, root)
    yield proc, root
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_gpu_check_dry_run_on_cpu(tmp_path, failing_check):
    out = tmp_path / "out"
    env = {**os.environ, "GPU_CHECK_MODEL": "gpt-tiny", "DEVICE": "cpu", "GPU_CHECK_TP": "1,2", "GPU_CHECK_MBS": "1,2",
           "GPU_CHECK_BATCH": "4", "GPU_CHECK_BUDGET": "64MiB", "GPU_CHECK_TOPK": "3", "GPU_CHECK_STEPS": "2",
           "GPU_CHECK_RUN_STEPS": "2", "GPU_CHECK_REPEATS": "2", "GPU_CHECK_DEADLINE_S": "400",
           "OUT": str(out), "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], env=env, capture_output=True,
                          text=True, timeout=410, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    stages = {s["name"]: s for s in report["stages"]}
    assert list(stages) == ["env", "profile_model", "profile_cluster", "solve", "validate", "run", "fp8"]
    assert all(s["rc"] == "0" for s in stages.values()), stages
    rows = report["layers"]["rows"]
    assert {(r["kind"], r["tp"]) for r in rows} >= {("block", 1), ("block", 2), ("head", 1)}
    assert all(r["time_ratio"] > 0 and r["analytic_saved_activation_bytes"] > 0 for r in rows if r["kind"] == "block")
    assert report["layers"]["precision"] == "bf16" and report["layers"]["catalogue"] == "dgx-h200-141gb:1"
    assert "CUDA GPU with fp8 tensor cores" in json.loads((out / "fp8.json").read_text())[0]["refused"]
    runs = report["validate"]
    assert len(runs) == 3 and all("measured_step_s" in r for r in runs), runs
    assert len({r["layout"] for r in runs}) == 3 and runs[0]["chosen"]
    assert [s["step"] for s in report["run"]["steps"]] == [0, 1]
    assert report["checks"]["step_time_within_15pct"]["n"] == 3
    assert report["cluster"]["world_size"] == 1
    for name in ("gpu_check.md", "gpu_check.log", "model.json", "cluster.json", "plan.json", "validate.json"):
        assert (out / name).is_file(), name
    assert "## Checks (issue 10)" in (out / "gpu_check.md").read_text()
    assert "step_time_within_15pct" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_gpu_check_reports_a_failed_stage_and_keeps_the_others(failing_check):
    proc, root = failing_check
    out = root / "out"
    assert proc.wait(timeout=110) == 0, (root / "stderr").read_text()[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    stages = {s["name"]: s for s in report["stages"]}
    assert stages["profile_model"]["rc"] == "2" and "no-such-model" in stages["profile_model"]["error"]
    assert stages["profile_cluster"]["rc"] == "0" and report["cluster"]["world_size"] == 1
    assert stages["solve"]["rc"] != "0" and "error" in report["layers"]
