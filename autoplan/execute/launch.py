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


def run_worker(body: "Callable[[], None]") -> int:
    """Run a torchrun worker's ``body`` and return its exit code: an :class:`AutoplanError`
    becomes one ``error: ...`` line (from rank 0; every rank fails alike) and code 2; the process
    group is always torn down.

    SIGTERM or SIGINT (torchrun stopping its workers, or Ctrl-C) unwinds ``body`` (so a file being
    written is removed, see :mod:`autoplan.jsonio`) and ends the worker quietly with ``128 +
    signum``: whatever a peer's collective raises once the others are stopping is not reported."""
    import signal

    import torch.distributed as dist

    from autoplan.errors import AutoplanError, Interrupted
    stopped: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        stopped.append(signum)
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
        if stopped:
            return 128 + stopped[0]
        raise
    finally:
        for s in (signal.SIGINT, signal.SIGTERM):      # the teardown below is not interrupted again
            signal.signal(s, signal.SIG_IGN)
        if dist.is_initialized() and not stopped:
            dist.destroy_process_group()
    return 0


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
                     max_restarts: int = 0) -> list[str]:
    """The ``python -m torch.distributed.run`` command line that runs ``script`` with the plan's layout.

    ``--plan plan_path`` is put before ``script_args`` unless they already carry ``--plan``.
    ``max_restarts > 0`` lets torchrun restart the whole worker group that often after a failure
    (the script resumes from its checkpoint: ``examples/train_gpt.py --ckpt-dir``).
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
