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


@pytest.mark.timeout(30)
def test_an_interrupt_python_drops_is_not_printed_and_comes_again(capfd):
    """A signal whose handler runs inside a weakref callback (as Ctrl-C once did inside the import
    machinery's module-lock callback during `profile model`): Python drops the exception there and
    prints it with a traceback; under interrupts_raise nothing is printed and the interrupt still
    unwinds the block a moment later."""
    import signal
    import weakref

    from autoplan.errors import Interrupted
    from autoplan.processes import interrupts_raise

    class Thing:
        pass

    def callback(_ref) -> None:
        signal.raise_signal(signal.SIGINT)      # the handler runs here, inside the callback
        sum(range(1000))                        # bytecode for it to run at

    with pytest.raises(Interrupted):
        with interrupts_raise():
            thing = Thing()
            ref = weakref.ref(thing, callback)
            del thing                           # the callback runs; its Interrupted is dropped
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the signal comes again and raises here
                time.sleep(0.01)
    assert ref() is None
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception ignored" not in err, err
