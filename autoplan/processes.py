"""Child processes that end with their parent, and signals that unwind instead of killing.

Every command that starts processes (``profile cluster``'s spawned workers, ``validate``'s and the
demo's torchrun, ``run``'s torchrun agent and its workers, CBC under ``solve``) must leave none
behind when it is interrupted. Three parts:

- :func:`interrupts_raise`: while active, SIGINT and SIGTERM raise :class:`Interrupted` in the main
  thread, so ``finally`` blocks run (temporary files removed, workers stopped) and the CLI prints
  one line and exits ``128 + signum`` (130 for Ctrl-C, 143 for SIGTERM);
- :func:`run_command`: ``subprocess.run`` for a command that starts its own children (torchrun):
  the child gets its own session; on a timeout or an interrupt it is asked to stop (SIGTERM, which
  torchrun forwards to its workers), then it and every process it started are killed;
- :func:`end_descendants`: the CLI's last resort on an interrupt: every process still below this
  one (found from ``/proc``, no psutil) gets SIGTERM, then SIGKILL after a grace period.

    with interrupts_raise():
        proc = run_command([sys.executable, "-m", "torch.distributed.run", ...], timeout_s=900)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from autoplan.errors import Interrupted

REDELIVER_S = 0.05
"""how long after an interrupt Python dropped or an import put off (see :func:`interrupts_raise`) it is
delivered again"""

IMPORT_DEFER_MAX_S = 10.0
"""how long an interrupt that arrives during an import waits for the import to end before it is raised
there all the same (an imported file that never ends its work must not make Ctrl-C useless)"""

STOP_GRACE_S = 10.0
"""how long a stopped child (torchrun: it stops its own workers first) may take before SIGKILL"""


_received: list[int] = []
"""signals :func:`interrupts_raise` has turned into :class:`Interrupted` in this process, in order"""


def interrupt_received() -> int | None:
    """The first signal :func:`interrupts_raise` turned into :class:`Interrupted` in this process, or
    None. A library can swallow the exception (a bare ``except:`` around an optional import) and then
    fail on what the cut-short import left behind (numpy without ``numpy.matrix``): the CLI asks this
    so that such a failure still ends as the interrupt it is."""
    return _received[0] if _received else None


def forget_interrupts() -> None:
    """Clear :func:`interrupt_received`'s record (the CLI does at the start of each command, so a
    command run in the same process after an interrupted one is not taken as interrupted)."""
    _received.clear()


@contextmanager
def interrupts_raise(signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """While active (main thread only; elsewhere a no-op), each of ``signals`` raises
    :class:`Interrupted`; the previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    deferred_since: dict[int, float] = {}
    redelivery_due: set[int] = set()

    def handler(signum: int, frame) -> None:
        # Inside an import the signal is put off until the import has ended. Raised there, it cuts a
        # module's initialisation short: torch's native init then calls std::terminate (exit -6 with a
        # C++ stack: seen once in CI, Ctrl-C during an import under `solve`), and numpy fails on a
        # second load ("cannot load module more than once per process").
        if _importing(frame):
            first_s = deferred_since.setdefault(signum, time.monotonic())
            if time.monotonic() - first_s < IMPORT_DEFER_MAX_S:
                redeliver_later(signum)
                return
        deferred_since.pop(signum, None)
        _received.append(signum)
        raise Interrupted(signum)

    def redeliver_later(signum: int) -> None:
        # One redelivery due per signal: Ctrl-C pressed again meanwhile joins it instead of raising a
        # second Interrupted later, inside the command's cleanup.
        if signum not in redelivery_due:
            redelivery_due.add(signum)
            with threads_block():               # the timer's thread must not take the signal itself
                threading.Timer(REDELIVER_S, again, (signum,)).start()

    def again(signum: int) -> None:
        redelivery_due.discard(signum)
        if not active:                               # the block has ended (its end records the signal)
            return
        if signal.getsignal(signum) is handler:
            os.kill(os.getpid(), signum)             # to the process: this timer thread blocks it (threads_block)
        else:
            # Set aside for a moment inside the block (children_ignore while processes start): the
            # signal is still due. Dropped here, it was lost: `profile cluster` interrupted 1-1.5 s in,
            # during its imports, ran to the end and exited 0 on 7 of 20 tries (2026-12-06).
            redeliver_later(signum)

    previous_hook = sys.unraisablehook

    def unraisable(info) -> None:
        # The handler raised where Python drops exceptions and prints them with a traceback (a
        # weakref callback of the import machinery, a __del__): say nothing, and deliver the signal
        # again a moment later, where the exception unwinds the command (seen once in a test: Ctrl-C
        # during `profile model`'s imports printed "Exception ignored in ... cb" and a traceback).
        if isinstance(info.exc_value, Interrupted):
            redeliver_later(info.exc_value.signum)
            return
        previous_hook(info)

    active = True
    previous = {s: signal.signal(s, handler) for s in signals}
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        active = False
        sys.unraisablehook = previous_hook
        for s, h in previous.items():
            signal.signal(s, h)
        # a signal put off and not yet raised when the block ends was received all the same
        # (interrupt_received() says so to the caller)
        _received.extend(s for s in deferred_since if s not in _received)


def _importing(frame) -> bool:
    """Whether ``frame`` (the one a signal handler was called in) or any frame below it is the import
    machinery's: a module is being initialised."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


@contextmanager
def threads_block(signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Threads started while active (this process's own: a TCPStore's server, a timer) keep ``signals``
    blocked for good, so that the kernel hands a signal sent to the process to the main thread, where
    Python's handlers run.  A thread that does not block it may receive it instead: while
    :func:`children_ignore` sets the signal to be ignored, such a thread drops it (`profile cluster`
    interrupted 1.08 s in ran to the end and exited 0 once in CI, 2026-12-07, its store's server
    thread the likely receiver).  It sets the calling thread's own mask: the redelivery timer's thread
    calls it too."""
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)


@contextmanager
def children_ignore(signals: Sequence[int]) -> Iterator[None]:
    """Processes started while active ignore ``signals`` (an ignored disposition survives fork and
    exec, and Python then leaves it alone); this process gets any of them that arrive meanwhile when
    the block ends (Linux keeps a blocked signal pending even while it is ignored). Main thread only.
    The mask is the main thread's: a thread of this process that does not block ``signals`` may take
    one meanwhile and, the signal being ignored, drop it, so start threads inside :func:`threads_block`
    (a TCPStore's server, a timer)."""
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)


def _stat_fields() -> dict[int, list[bytes]]:
    """pid -> the fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:          # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; split after the last ')'
        out[int(name)] = stat[stat.rfind(b")") + 2:].split()
    return out


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process visible in /proc."""
    return {p: int(f[1]) for p, f in _stat_fields().items()}


def session_members(sid: int) -> list[int]:
    """Every living process of session ``sid`` (a child started with ``start_new_session`` leads the
    session of its own pid; its descendants stay in it after their parent is gone and they are
    re-parented, where :func:`descendants` no longer finds them)."""
    return [p for p, f in _stat_fields().items() if int(f[3]) == sid and p != os.getpid() and f[:1] != [b"Z"]]


def descendants(pid: int | None = None) -> list[int]:
    """Every living process below ``pid`` (default: this one), children before grandchildren."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for p, pp in _parents().items():
        children.setdefault(pp, []).append(p)
    out, frontier = [], [root]
    while frontier:
        frontier = [c for p in frontier for c in children.get(p, [])]
        out += frontier
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:                          # a zombie is dead; its parent has not reaped it yet
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:][:1] != b"Z"
    except OSError:
        return False


def end_processes(pids: Sequence[int], grace_s: float = STOP_GRACE_S, first: int = signal.SIGTERM) -> None:
    """Send ``first`` to each of ``pids``, wait up to ``grace_s`` for them to go, SIGKILL the rest."""
    for p in pids:
        try:
            os.kill(p, first)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in pids:
        if _alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _is_resource_tracker(pid: int) -> bool:
    """multiprocessing's resource tracker: it ignores SIGTERM and leaves by itself when this process
    exits (its pipe closes); killing it first makes the exit print its tracebacks."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"multiprocessing.resource_tracker" in f.read()
    except OSError:
        return False


def end_descendants(grace_s: float = STOP_GRACE_S) -> None:
    """End every process below this one (SIGTERM, then SIGKILL after ``grace_s``), except
    multiprocessing's resource tracker, which ends with this process."""
    pids = [p for p in descendants() if not _is_resource_tracker(p)]
    if pids:
        end_processes(pids, grace_s)
        end_processes([p for p in descendants() if p not in pids and not _is_resource_tracker(p)], 0.5)


def stop_process_tree(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """Ask ``proc`` to stop (SIGTERM: torchrun then stops its workers), wait ``grace_s``, then
    SIGKILL whatever of it and its descendants (as found before the stop) is left, and reap it.
    A process ``proc`` started in its own session (``run_command``) also loses every member of that
    session: a worker started while the stop arrived outlives its agent re-parented, holds the
    output pipes open and would keep ``communicate`` waiting."""
    left: list[int] = []
    if proc.poll() is None:
        below = descendants(proc.pid)
        end_processes([proc.pid], grace_s)
        left = below + descendants(proc.pid)
    left += session_members(proc.pid)
    end_processes([p for p in dict.fromkeys(left) if _alive(p)], 1.0, first=signal.SIGKILL)
    proc.wait()


def run_command(cmd: Sequence[str], *, timeout_s: float, **popen) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)`` for a command
    that starts children of its own: on the timeout (``subprocess.TimeoutExpired``) or an interrupt
    the command and all its descendants are stopped before the exception goes on."""
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True, **popen)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException:
        stop_process_tree(proc)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
