"""A command stopped on a timeout takes with it what it started, also a child re-parented when its parent went."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def _module(tmp_path, monkeypatch, name: str, source: str) -> Iterator[None]:
    """``name`` importable from ``source`` while active; forgotten by ``sys.modules`` afterwards."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield
    finally:
        sys.modules.pop(name, None)


def _busy(seconds: float) -> None:
    """Run bytecode for ``seconds`` (not asleep: each signal delivered meanwhile is handled on its own)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _import_interrupted(tmp_path, monkeypatch, name: str, body_s: float) -> tuple[bool, float]:
    """Import a module whose body raises SIGINT against itself and then works ``body_s`` seconds, under
    interrupts_raise; return (whether the import ran to its end, seconds until Interrupted)."""
    from autoplan.errors import Interrupted
    from autoplan.processes import interrupts_raise

    source = ("import signal, time\n"
              "signal.raise_signal(signal.SIGINT)\n"
              f"end = time.monotonic() + {body_s}\n"
              "while time.monotonic() < end:\n"
              "    time.sleep(0.01)\n"
              "DONE = True\n")
    imported = False
    t0 = time.monotonic()
    with _module(tmp_path, monkeypatch, name, source):
        with pytest.raises(Interrupted):
            with interrupts_raise():
                __import__(name)
                imported = True
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    time.sleep(0.01)
        return imported and getattr(sys.modules.get(name), "DONE", False), time.monotonic() - t0


@pytest.mark.timeout(30)
def test_an_interrupt_during_an_import_waits_for_the_import_to_end(tmp_path, monkeypatch):
    """Ctrl-C while a module initialises is raised once the import has ended, not inside it (raised there,
    torch's native init called std::terminate and the CLI died with -6 instead of exit 130)."""
    finished, _ = _import_interrupted(tmp_path, monkeypatch, "autoplan_slow_init", 0.5)
    assert finished, "the interrupt cut the module's initialisation short"


@pytest.mark.timeout(30)
def test_an_import_that_never_ends_is_interrupted_all_the_same(tmp_path, monkeypatch):
    import autoplan.processes
    monkeypatch.setattr(autoplan.processes, "IMPORT_DEFER_MAX_S", 0.3)
    finished, waited_s = _import_interrupted(tmp_path, monkeypatch, "autoplan_endless_init", 20.0)
    assert not finished and waited_s < 5, (finished, waited_s)


@pytest.mark.timeout(30)
def test_an_interrupt_put_off_is_still_due_after_signals_were_set_aside(tmp_path, monkeypatch):
    """The redelivery of a signal put off during an import can fall while processes start with the signal
    set aside (children_ignore): it waits, and is raised after (dropped there, `profile cluster`
    interrupted during its imports ran to its end and exited 0 on 7 of 20 tries)."""
    from autoplan.errors import Interrupted
    from autoplan.processes import children_ignore, interrupts_raise

    with _module(tmp_path, monkeypatch, "autoplan_then_spawn", "import signal\nsignal.raise_signal(signal.SIGINT)\n"):
        with pytest.raises(Interrupted):
            with interrupts_raise():
                __import__("autoplan_then_spawn")
                with children_ignore([signal.SIGINT]):
                    time.sleep(0.3)                 # several redeliveries fall in here
                _busy(3)


def test_an_interrupt_put_off_when_the_block_ends_is_received_all_the_same(tmp_path, monkeypatch):
    from autoplan.processes import forget_interrupts, interrupt_received, interrupts_raise

    forget_interrupts()
    with _module(tmp_path, monkeypatch, "autoplan_last_import", "import signal\nsignal.raise_signal(signal.SIGINT)\n"):
        with interrupts_raise():
            __import__("autoplan_last_import")      # the block ends before the redelivery is due
    time.sleep(0.2)
    assert interrupt_received() == signal.SIGINT
    forget_interrupts()


@pytest.mark.timeout(30)
def test_ctrl_c_pressed_again_during_an_import_raises_once(tmp_path, monkeypatch):
    """Five signals while a module initialises: one Interrupted after the import, and none later while the
    command unwinds (each used to start its own redelivery, and each raised again in the cleanup)."""
    from autoplan.errors import Interrupted
    from autoplan.processes import interrupts_raise

    source = ("import signal, time\n"
              "def busy(s):\n"                     # as _busy: each redelivery is handled on its own
              "    end = time.monotonic() + s\n"
              "    while time.monotonic() < end:\n"
              "        pass\n"
              "for _ in range(5):\n"               # five presses 20 ms apart
              "    signal.raise_signal(signal.SIGINT)\n"
              "    busy(0.02)\n"
              "busy(0.3)\n")
    raised = 0
    with _module(tmp_path, monkeypatch, "autoplan_pressed_again", source):
        with interrupts_raise():
            try:
                __import__("autoplan_pressed_again")
                _busy(5)
            except Interrupted:
                raised += 1
            try:
                _busy(1.0)                          # the cleanup: no second Interrupted may arrive here
            except Interrupted:
                raised += 1
    assert raised == 1, raised
