"""Scripts read the commands' output: ``--version``, ``--json`` of profile, and the validation plot's data."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest

from autoplan.plan.plan import Layout, Prediction
from autoplan.validate import Measured, Run


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autoplan.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_version_is_the_package_metadata():
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"autoplan {version('autoplan')}"


def test_profile_model_json(tmp_path):
    out = tmp_path / "m.json"
    r = _cli("profile", "model", "--model", "gpt-tiny", "--mbs", "1", "--repeats", "1", "--warmup", "0",
             "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["out"] == str(out) and out.exists()
    assert d["layers"] == 6 and d["params"] > 0
    assert d["block"]["mbs"] == 1 and d["block"]["forward_s"] > 0 and d["block"]["backward_s"] > 0


def test_validation_plot_draws_predicted_and_measured(tmp_path):
    pytest.importorskip("matplotlib")
    from autoplan.draw import draw_validation
    runs = [Run(Layout(dp=2), Prediction(step_time_s=0.5, peak_memory_bytes=40 * 2**20, breakdown_s={}),
                Measured(0.8, 44 * 2**20, [0.8], [44 * 2**20])),
            Run(Layout(tp=2), Prediction(step_time_s=0.7, peak_memory_bytes=30 * 2**20, breakdown_s={}),
                Measured(0.6, 29 * 2**20, [0.6], [29 * 2**20])),
            Run(Layout(pp=2), Prediction(step_time_s=0.9, peak_memory_bytes=20 * 2**20, breakdown_s={}), None,
                error="failed")]
    fig = draw_validation(runs, tmp_path / "v.png", budget_bytes=48 * 2**20)
    assert (tmp_path / "v.png").stat().st_size > 5_000
    ax_t, ax_m = fig.axes
    widths = [p.get_width() for p in ax_t.patches]
    assert widths == pytest.approx([500, 700, 800, 600])      # ms: predicted bars, then measured; unmeasured left out
    assert [p.get_width() for p in ax_m.patches] == pytest.approx([40, 30, 44, 29])   # MiB
