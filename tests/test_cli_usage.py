"""Usage errors from the INSTALLED ``autoplan`` console script: click's usage line, one ``error:`` line, exit 2.

These run the script pip wrote (not typer's in-process runner, not ``python -m autoplan.cli``), so that a typer or
click upgrade that changes how usage errors are raised (typer 0.26 vendored click: its exceptions are no longer
``click``'s) fails here instead of printing a traceback to users.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import autoplan.cli as cli

CLUSTER = "dgx-a100-80gb:1"
PROFILES = Path(__file__).resolve().parent.parent / "profiles"


def console_script() -> str:
    """The ``autoplan`` script of this interpreter's environment (pip install -e . writes it next to python)."""
    here = Path(sys.executable).parent / ("autoplan.exe" if sys.platform == "win32" else "autoplan")
    found = str(here) if here.exists() else shutil.which("autoplan")
    if found is None:
        pytest.fail("no `autoplan` console script: install the package (pip install -e .)")
    return found


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([console_script(), *args], capture_output=True, text=True, timeout=60)


def assert_usage_error(proc: subprocess.CompletedProcess, needle: str, usage: str | None) -> str:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    assert proc.returncode == 2, (proc.returncode, out)
    errors = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert needle in errors[0], errors[0]
    if usage is not None:
        assert proc.stderr.splitlines()[0].startswith(f"Usage: {usage}"), proc.stderr
    assert not proc.stdout.strip(), proc.stdout
    return errors[0]


@pytest.mark.parametrize("args, needle, usage", [
    (["profile", "model", "--model", "gpt-tiny", "--out", "m.json", "--bogus"], "--bogus", "autoplan profile model"),
    (["profile", "model", "--model", "gpt-tiny", "--ouy", "m.json"], "--ouy", "autoplan profile model"),
    (["solve"], "--model", "autoplan solve"),
    (["nosuchcommand"], "nosuchcommand", "autoplan"),
    (["solv"], "solv", "autoplan"),          # click >= 8.2 adds "Did you mean 'solve'?"
    (["profile", "nosuchcommand"], "nosuchcommand", "autoplan profile"),
    (["solve", "--global-batch", "x", "--model", "gpt-tiny", "--cluster", CLUSTER], "--global-batch", "autoplan solve"),
    (["estimate", "--model", "gpt-tiny", "--cluster", CLUSTER, "--global-batch", "8"], "--layout", "autoplan estimate"),
    (["profile", "model", "--model", "gpt-tiny", "--out", "m.json", "--repeats", "1.5"], "--repeats", None),
    (["solve", "--global-batch"], "--global-batch", None),   # no value: click gives no usage line here
], ids=["unknown-option", "option-typo", "missing-options", "unknown-command", "command-typo", "unknown-subcommand",
        "not-an-int", "missing-one-option", "float-for-int", "option-without-value"])
def test_usage_error_is_one_line_and_exit_2(args, needle, usage, tmp_path):
    assert_usage_error(run_script(*args), needle, usage)
    assert not (tmp_path / "m.json").exists() and not Path("m.json").exists()


@pytest.mark.parametrize("args, choice", [
    (["solve", "--model", "gpt-tiny", "--cluster", CLUSTER, "--global-batch", "8", "--precision"], "fp8-rowwise"),
    (["solve", "--model", "gpt-tiny", "--cluster", CLUSTER, "--global-batch", "8", "--optimizer"], "adamw-bf16"),
    (["solve", "--model", "gpt-tiny", "--cluster", CLUSTER, "--global-batch", "8", "--preset"], "megatron"),
    (["export", "plan.json", "--to"], "torchtitan-toml"),
], ids=["precision", "optimizer", "preset", "export-target"])
def test_bad_choice_is_a_usage_error(args, choice):
    """Options with a fixed set of values are typed (Literal): a value outside it is refused while the options
    are parsed, before the command runs, in one error line that names the option and lists the choices."""
    proc = run_script(*args, "bogus")
    line = assert_usage_error(proc, "bogus", usage=f"autoplan {args[0]}")
    assert args[-1] in line and choice in line, line


def test_help_exits_0():
    for args in (["--help"], ["solve", "--help"], ["profile", "model", "--help"]):
        proc = run_script(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Usage" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr


def test_no_command_shows_help():
    proc = run_script()
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "solve" in proc.stdout + proc.stderr and "profile" in proc.stdout + proc.stderr
    assert proc.returncode in (0, 2)       # click < 8.2 exits 0 after the help, 8.2 and typer's copy exit 2


def test_usage_errors_do_not_import_torch():
    """Help and usage errors answer in a fraction of a second: parsing happens before any command imports torch."""
    for args in (["--help"], ["solve"], ["solve", "--global-batch", "x", "--model", "m", "--cluster", "c"]):
        proc = subprocess.run([sys.executable, "-X", "importtime", console_script(), *args], capture_output=True,
                              text=True, timeout=60)
        imported = {l.split("|")[-1].strip() for l in proc.stderr.splitlines() if l.startswith("import time:")}
        assert imported and not any(m == "torch" or m.startswith("torch.") for m in imported), args
        assert "pulp" not in imported, args


# In-process: paths the console script cannot reach cheaply (Ctrl-C at a known point, a worker's exit code).

def test_ctrl_c_in_a_command_exits_130_with_one_line(monkeypatch, capsys):
    import autoplan.plan.api as api

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(api, "solve_problem", interrupted)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["solve", "--model", "gpt-tiny", "--cluster", CLUSTER, "--global-batch", "8"])
    assert exit_.value.code == 130
    assert capsys.readouterr().err.strip().splitlines() == ["error: interrupted"]


def test_run_passes_on_the_workers_exit_code(monkeypatch, tmp_path, capsys):
    """``autoplan run`` ends with the code of the first failing worker (typer.Exit comes back as a return value)."""
    plan = tmp_path / "plan.json"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["solve", "--model", str(PROFILES / "gpt-small.cpu.json"), "--cluster", str(PROFILES / "cpu-2proc.json"),
                  "--global-batch", "2", "--out", str(plan)])
    assert exit_.value.code == 0 and plan.exists()
    import autoplan.execute.launch as launch
    calls = []
    monkeypatch.setattr(launch, "launch", lambda *a, **k: calls.append(a) or 5)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", str(plan), "--", "train.py", "--steps", "3"])
    assert exit_.value.code == 5
    assert calls == [(str(plan), "train.py", ["--steps", "3"])]
