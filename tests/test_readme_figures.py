"""``benchmarks/readme_figures.sh`` names a command for every figure of the README (its dry run
prints them and runs nothing), so re-measuring the README cannot fall behind it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "readme_figures.sh"


def _run(*args: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "OUT": str(out)})


def test_dry_run_lists_every_readme_figure_and_runs_nothing(tmp_path):
    out = tmp_path / "out"
    proc = _run("--dry-run", out=out)
    assert proc.returncode == 0, proc.stderr
    assert not out.exists()                      # nothing ran, nothing written
    printed = proc.stdout
    names = _run("--list", out=out).stdout.split()
    assert [line.split(":")[0] for line in printed.splitlines() if line and not line.startswith(" ")] == names
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Measured figures", 1)[1].split("\n## ", 1)[0]
    scripts = set(re.findall(r"`(?:python |python -m pytest )((?:benchmarks|tests)/\w+\.py)", table))
    assert len(scripts) >= 8
    for s in sorted(scripts):
        assert str(REPO / s) in printed, f"the README's figure of {s} has no command in readme_figures.sh"
    assert "autoplan demo" in printed
    for picture in sorted(set(re.findall(r"docs/img/[\w.-]+\.png", readme))):
        assert f"{REPO}/{picture}" in printed, f"{picture} is not re-drawn by readme_figures.sh"


def test_only_and_bad_usage(tmp_path):
    one = _run("--dry-run", "--only", "fidelity,soak", out=tmp_path)
    assert one.returncode == 0 and [line.split(":")[0] for line in one.stdout.splitlines()] == ["fidelity", "soak"]
    bad = _run("--dry-run", "--only", "fidelty", out=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: no README figure named 'fidelty' (--list names them)"
    assert _run("--frobnicate", out=tmp_path).returncode == 2


def test_each_figure_has_one_row():
    """A figure re-measured replaces its row: two rows of one figure would show an old result beside the new."""
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Measured figures", 1)[1].split("\n## ", 1)[0]
    names = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    assert len(names) > 8 and len(set(names)) == len(names), [n for n in names if names.count(n) > 1]
