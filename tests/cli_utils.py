"""``autoplan ARGS`` run in this process: ``autoplan.cli.main``, the console script's entry point, with
its exit code and what it printed, as ``subprocess.run(..., capture_output=True, text=True)`` returns
them. Saves starting an interpreter and importing torch for each command; tests/test_cli_usage.py runs
the installed script itself."""

from __future__ import annotations

import io
import subprocess
from contextlib import redirect_stderr, redirect_stdout


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    from autoplan.cli import main
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(argv))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return subprocess.CompletedProcess(["autoplan", *argv], code, out.getvalue(), err.getvalue())
