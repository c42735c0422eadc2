"""A command stopped on a timeout takes with it what it started, also a child re-parented when its parent went."""

from __future__ import annotations

import subprocess
import time

import pytest

from autoplan.processes import _alive, run_command, session_members


@pytest.mark.timeout(60)
def test_a_timeout_stops_the_orphans_that_hold_the_output_open(tmp_path):
    """The command's subshell starts a sleeper and exits at once (the sleeper is re-parented, no longer a
    descendant) while the command itself waits: on the timeout run_command must not wait for the
    orphan, which still holds stdout open, and the orphan must be gone."""
    pid_file = tmp_path / "orphan.pid"
    cmd = ["bash", "-c", f"(sleep 120 & echo $! > {pid_file}); sleep 120"]
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_command(cmd, timeout_s=1.0)
    assert time.monotonic() - t0 < 30, "run_command waited for the orphan"
    orphan = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(orphan) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(orphan)


def test_session_members_finds_a_new_session():
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert session_members(proc.pid) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()
