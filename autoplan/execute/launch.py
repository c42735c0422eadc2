"""Start a training script under ``torchrun`` with the plan's world size.

    torchrun_command("plan.json", "examples/train_gpt.py", ["--steps", "20"])
    # [python, -m, torch.distributed.run, --nproc-per-node=4, --nnodes=1, --standalone,
    #  examples/train_gpt.py, --plan, plan.json, --steps, 20]

One node: ``--standalone`` (a local c10d rendezvous on a free port). Several nodes: run the same
command on each with ``nnodes``, this node's ``node_rank`` and a shared ``rdzv_endpoint``
(``host:port``, c10d rendezvous).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from autoplan.errors import InputError, LaunchError
from autoplan.plan.plan import Plan

_STORE_TIMEOUT_S = 300
"""how long a worker waits for the others at the rendezvous store (torch's default for gloo)"""


def init_process_group(backend: str) -> None:
    """``dist.init_process_group(backend)`` inside a torchrun worker, safe across torchrun restarts.

    Since torch 2.4 the torchrun agent shares one TCPStore across restarts of the worker group
    (``TORCHELASTIC_USE_AGENT_STORE``), and the workers of a restart then read the previous
    attempt's process-group keys (gloo peers' old addresses: "connectFullMesh failed ... Connection
    refused"). The store is prefixed here by ``TORCHELASTIC_RESTART_COUNT``, as torch itself did
    before, so every attempt meets only its own keys. Outside torchrun's agent store (and under
    ``autoplan run --elastic``, which gives each round a store of its own) this is the plain
    environment initialisation.
    """
    import datetime

    import torch.distributed as dist

    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        dist.init_process_group(backend)
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=_STORE_TIMEOUT_S)
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False,
                          timeout=timeout)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group(backend, store=dist.PrefixStore(f"autoplan/attempt_{attempt}/", store), rank=rank,
                            world_size=world, timeout=timeout)


def stop_quietly_until_ready() -> None:
    """Call first thing in a torchrun worker script, before ``import torch``: until :func:`run_worker`
    installs its own handlers, SIGINT or SIGTERM ends the worker at once with ``128 + signum`` and
    nothing printed. Importing torch takes seconds on a busy machine; a Ctrl-C in that window had
    printed a ``KeyboardInterrupt`` traceback from the middle of torch's imports. Nothing has been
    started or written yet, so there is nothing to unwind. This module imports no torch."""
    import signal

    def stop(signum: int, frame: object) -> None:
        os._exit(128 + signum)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, stop)


PEER_STOP_GRACE_S = 2.0
"""how long a worker whose body failed waits for its own stop signal before reporting the failure. When
torchrun or a Ctrl-C stops the job, a peer that exits first breaks the collective this worker is blocked
in, and the signal it got at the same moment is handled only once that call has returned with the
peer's "Connection closed by peer" (CI at 9273af5: ``tests/test_interrupts.py::test_run[SIGINT-plain]``
printed that traceback, chained with the signal's, on one rank of two)"""


def run_worker(body: "Callable[[], None]") -> int:
    """Run a torchrun worker's ``body`` and return its exit code: an :class:`AutoplanError`
    becomes one ``error: ...`` line (from rank 0; every rank fails alike) and code 2; the process
    group is always torn down.

    SIGTERM or SIGINT (torchrun stopping its workers, or Ctrl-C) unwinds ``body`` (so a file being
    written is removed, see :mod:`autoplan.jsonio`) and ends the worker quietly with ``128 +
    signum``: whatever a peer's collective raises once the others are stopping is not reported, also
    where this worker's own signal comes a moment after that error (:data:`PEER_STOP_GRACE_S`). Once
    ``body`` has ended, a signal is only recorded: it does not interrupt the error handling or the
    teardown."""
    import signal
    import time

    import torch.distributed as dist

    from autoplan.errors import AutoplanError, Interrupted
    stopped: list[int] = []
    running = True

    def on_signal(signum: int, frame: object) -> None:
        stopped.append(signum)
        if running:
            raise Interrupted(signum)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    try:
        body()
    except AutoplanError as e:
        if int(os.environ.get("RANK", "0")) == 0:       # set by torchrun
            print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    except BaseException:
        try:
            running = False
            deadline = time.monotonic() + (PEER_STOP_GRACE_S if dist.is_initialized() else 0.0)
            while not stopped and time.monotonic() < deadline:
                time.sleep(0.02)
        except Interrupted:         # the signal was handled before ``running`` fell
            pass
        if stopped:
            return 128 + stopped[0]
        raise
    finally:
        running = False
        for s in (signal.SIGINT, signal.SIGTERM):      # the teardown below is not interrupted again
            signal.signal(s, signal.SIG_IGN)
        if dist.is_initialized() and not stopped:
            dist.destroy_process_group()
    return 0


def exit_worker(code: int) -> None:
    """End a torchrun worker with ``code`` once :func:`run_worker` has torn the process group down:
    flush stdio and leave without running C++ static destructors. With gloo on CPU a worker could
    otherwise abort at interpreter exit ("terminate called without an active exception", SIGABRT,
    seen about one run in three of a cp=2 plan on 2 processes after every step had finished),
    which torchrun reports as a failed run. Every worker entry point leaves through it: train_gpt,
    finetune_hf, measure (validate) and group_profile."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


MAX_PROCESSES_PER_CPU_CORE = 4
"""on a node without GPUs, at most this many worker processes per core (CPU processes stand in for
devices; more than a few per core measure nothing but the scheduler)"""


def check_local_world(nproc_per_node: int, nnodes: int) -> None:
    """Refuse to start more workers on this node than it has GPUs (or, without GPUs, 4 per core, at
    least 8): a plan for 1,024 devices run with ``--nnodes 1`` would otherwise fork 1,024 trainers."""
    import torch
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    limit = gpus or max(8, MAX_PROCESSES_PER_CPU_CORE * (os.cpu_count() or 1))
    if nproc_per_node > limit:
        have = f"{gpus} GPUs" if gpus else f"{os.cpu_count()} CPU cores (at most {limit} processes)"
        raise LaunchError(f"the plan needs {nproc_per_node} processes on each of {nnodes} node(s), but this node "
                          f"has {have}: launch on more nodes (--nnodes, --node-rank, --rdzv-endpoint)")


def _has_plan_arg(args: Sequence[str]) -> bool:
    return any(a == "--plan" or a.startswith("--plan=") for a in args)


def torchrun_command(plan_path: str | os.PathLike, script: str | os.PathLike, script_args: Sequence[str], *,
                     nnodes: int = 1, node_rank: int | None = None, rdzv_endpoint: str | None = None,
                     max_restarts: int = 0, log_dir: str | os.PathLike | None = None) -> list[str]:
    """The ``python -m torch.distributed.run`` command line that runs ``script`` with the plan's layout.

    ``--plan plan_path`` is put before ``script_args`` unless they already carry ``--plan``.
    ``max_restarts > 0`` lets torchrun restart the whole worker group that often after a failure
    (the script resumes from its checkpoint: ``examples/train_gpt.py --ckpt-dir``).
    ``log_dir``: each worker's stderr goes to a file of its own there instead of torchrun's stderr
    (``--log-dir --redirects 2``), for :func:`worker_failure` to read; stdout stays torchrun's.
    Raises :class:`InputError` for a bad plan file, :class:`LaunchError` when ``nnodes`` does not
    divide the plan's world size or a multi-node launch lacks its rendezvous endpoint.
    """
    plan = Plan.load(plan_path)
    world = plan.layout.world_size
    if nnodes < 1 or world % nnodes:
        raise LaunchError(f"plan world size {world} does not split over {nnodes} nodes")
    check_local_world(world // nnodes, nnodes)
    if max_restarts < 0:
        raise LaunchError(f"max_restarts must be >= 0, got {max_restarts}")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world // nnodes}",
           f"--nnodes={nnodes}"]
    if max_restarts:
        cmd.append(f"--max-restarts={max_restarts}")
    if log_dir is not None:
        cmd += [f"--log-dir={log_dir}", "--redirects=2"]
    if nnodes == 1 and rdzv_endpoint is None:
        cmd.append("--standalone")
    else:
        if rdzv_endpoint is None:
            raise LaunchError(f"a launch on {nnodes} nodes needs a rendezvous endpoint host:port")
        cmd += ["--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}"]
        if node_rank is not None:
            cmd.append(f"--node-rank={node_rank}")
    args = list(script_args)
    if not _has_plan_arg(args):
        args = ["--plan", str(plan_path), *args]
    return [*cmd, str(script), *args]


_ROOT_CAUSE = re.compile(r"Root Cause.*?rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)\s*"
                         r"exitcode\s*:\s*(-?\d+)[^\n]*?(\((SIG\w+)\))?\s*$", re.S | re.M)
"""torchrun's summary of a failed job: the rank that failed first, its local rank and exit code
(negative: the signal that ended it, named in parentheses)"""

_MESSAGE_LINES = 3
"""lines of an exception's message kept (torch's C++ errors go on with a stack of frames)"""


def final_exception(stderr: str) -> str:
    """The exception that ended a Python process, from its stderr: the lines that follow the frames
    of the last ``Traceback (most recent call last):`` (``ValueError: bad shape``; a message of
    several lines joined by spaces, at most 3 lines, up to torch's ``Exception raised from``);
    "" when there is no traceback."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if not starts:
        return ""
    i = starts[-1] + 1
    while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):   # frames, source, carets
        i += 1
    message = []
    for line in lines[i:i + _MESSAGE_LINES]:
        if not line.strip() or line.startswith(("Exception raised from", "frame #")):
            break
        message.append(line.strip())
    return " ".join(message)


def worker_failure(log_dir: str | os.PathLike, agent_stderr: str, returncode: int) -> str:
    """One line saying why a torchrun job started with ``log_dir`` (:func:`torchrun_command`) failed,
    from the worker's own words: the exception that ended the rank torchrun names as the root cause
    (``rank 1 (exit 1): ValueError: ...``), else an ``error: ...`` line a worker printed (a refusal,
    :func:`run_worker`), else that rank's last line, else how it ended (a signal)."""
    found = list(_ROOT_CAUSE.finditer(agent_stderr))
    if not found:
        return f"torchrun exited {returncode}: {_last_line(agent_stderr) or '(no output)'}"
    m = found[-1]
    rank, local_rank, code, signal_name = int(m[1]), int(m[2]), int(m[3]), m[5]
    who = f"rank {rank} ({'killed by ' + signal_name if signal_name else f'exit {code}'})"
    texts = worker_stderr(log_dir)
    mine = texts.get(local_rank, "")
    exception = final_exception(mine)
    if exception:
        return f"{who}: {exception}"
    refusals = [line.strip()[len("error:"):].strip() for text in [mine, *texts.values()] for line in text.splitlines()
                if line.startswith("error:")]
    if refusals:
        return f"{who}: {refusals[0]}"
    return f"{who}: {_last_line(mine) or '(no output)'}"


def worker_stderr(log_dir: str | os.PathLike) -> dict[int, str]:
    """Each local rank's stderr in the last attempt of a torchrun job started with ``log_dir``
    (:func:`torchrun_command`), by local rank; {} when it wrote none."""
    attempts = sorted(Path(log_dir).glob("*/attempt_*"), key=lambda p: int(p.name.split("_")[-1]))
    logs = sorted(attempts[-1].glob("*/stderr.log"), key=lambda p: int(p.parent.name)) if attempts else []
    return {int(p.parent.name): p.read_text(errors="replace") for p in logs}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def launch(plan_path: str | os.PathLike, script: str | os.PathLike, args: Sequence[str], *, nnodes: int = 1,
           node_rank: int | None = None, rdzv_endpoint: str | None = None, max_restarts: int = 0) -> int:
    """Run ``script args`` under torchrun with the plan's world size; returns the workers' exit code.

    This process runs the same torchrun agent as ``python -m torch.distributed.run`` with the
    arguments of :func:`torchrun_command`, so that the code of the first failing worker comes back
    (a plain ``torchrun`` exits 1 for any failure): 0 when all succeed, 2 when a worker refused the
    plan with one ``error:`` line (``examples/train_gpt.py``).
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    from autoplan.errors import Interrupted

    if not Path(script).is_file():
        raise InputError(f"training script not found: {script}")
    cmd = torchrun_command(plan_path, script, args, nnodes=nnodes, node_rank=node_rank,
                           rdzv_endpoint=rdzv_endpoint, max_restarts=max_restarts)
    try:
        run(parse_args(cmd[3:]))  # cmd[:3] is "python -m torch.distributed.run"
    except ChildFailedError as e:
        _, failure = e.get_first_failure()
        return failure.exitcode if failure.exitcode > 0 else 1
    except SignalException as e:   # the agent stopped its workers on SIGTERM/SIGINT (its own handlers)
        raise Interrupted(int(e.sigval)) from None
    return 0
