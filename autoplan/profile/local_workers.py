"""Process management for measuring a cluster on this machine: spawn local worker processes, watch
them, stop them.

:func:`run_local_workers` spawns one process per device (gloo on 127.0.0.1 through a TCPStore this
process holds), each runs the measurement engine (:func:`autoplan.profile.link_bench.run_all`) and
rank 0 writes its results to a temporary file. A hung collective cannot hang the caller: the
process group has ``timeout_s``, and the parent kills the workers when no progress arrives for
``timeout_s`` (plus a start-up allowance) and raises :class:`AutoplanError`. The workers ignore
SIGINT: a Ctrl-C reaches only the parent, which stops them.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import tempfile
import time
from dataclasses import asdict
from datetime import timedelta
from multiprocessing import resource_tracker
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from autoplan.errors import AutoplanError
from autoplan.jsonio import write_json_atomic
from autoplan.processes import children_ignore, threads_block
from autoplan.profile.link_bench import (LinkBenchConfig, LinkLayout, MeasuredGroup, RankZeroResult, RawLinkTimes,
                                         run_all)
from autoplan.profile.timing import ProgressCallback, ProgressEvent


STARTUP_ALLOWANCE_S = 120.0
"""time spawned workers get to import torch and join the process group before the watchdog runs"""


def max_local_processes() -> int:
    """The most local processes ``profile_cluster`` starts: 4 per CPU core (at least 8)."""
    return max(8, 4 * (os.cpu_count() or 1))


def _spawned_worker(rank: int, nproc: int, port: int, cfg: LinkBenchConfig, result_path: str,
                    events: "mp.Queue[ProgressEvent]") -> None:
    """One local process: join the gloo group through the parent's store, measure, and (rank 0)
    write the results to ``result_path``. It ignores SIGINT (the parent stops it on Ctrl-C, see
    :func:`run_local_workers`)."""
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, nproc, is_master=False, timeout=timedelta(seconds=cfg.timeout_s))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=nproc,
                            timeout=timedelta(seconds=cfg.timeout_s))
    try:
        res = run_all(cfg, torch.device("cpu"), events.put, socket.gethostname())
        if res is not None:
            write_json_atomic(result_path, {
                "rank_hosts": res.rank_hosts, "layout": asdict(res.layout), "raw": res.raw.to_json(),
                "compute_flops_per_s": res.compute_flops_per_s,
                "memory_bandwidth_bytes_per_s": res.memory_bandwidth_bytes_per_s, "device_name": res.device_name,
                "concurrent_compute_flops_per_s": res.concurrent_compute_flops_per_s,
            })
    finally:
        dist.destroy_process_group()


def _layout_from_json(d: dict) -> LinkLayout:
    def groups(key: str) -> tuple[MeasuredGroup, ...]:
        return tuple(MeasuredGroup(g["link_class"], tuple(g["ranks"])) for g in d[key])
    return LinkLayout(num_nodes=d["num_nodes"], devices_per_node=d["devices_per_node"],
                      collective_groups=groups("collective_groups"), pairs=groups("pairs"))


def _stop(context: mp.ProcessContext) -> None:
    """Terminate the workers this module started (and only them)."""
    for p in context.processes:
        if p.is_alive():
            p.terminate()
    for p in context.processes:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()



def run_local_workers(nproc: int, cfg: LinkBenchConfig, progress: ProgressCallback | None) -> RankZeroResult:
    """Spawn ``nproc`` local CPU processes (gloo on 127.0.0.1, one intra-op thread each), run every
    link and device measurement of ``cfg`` on them, and bring back rank 0's results.

    ``cfg.timeout_s`` bounds each collective and any silence of the workers (after
    ``STARTUP_ALLOWANCE_S``); ``progress`` is called in this process for each item the workers
    report. Raises AutoplanError when a worker fails or hangs; on any exit (Ctrl-C included) no
    worker outlives the call."""
    with threads_block():       # its server thread must never take the terminal's Ctrl-C (processes.threads_block)
        store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False,
                              timeout=timedelta(seconds=cfg.timeout_s))
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="autoplan-links-") as tmp:
        result_path = os.path.join(tmp, "rank0.json")
        context = None
        deadline = time.monotonic() + STARTUP_ALLOWANCE_S + cfg.timeout_s
        last = "start-up"
        try:
            # The terminal's Ctrl-C goes to the whole process group: the workers (and multiprocessing's
            # resource tracker) ignore it, so that only this process sees it and stops them.
            resource_tracker.ensure_running()     # now: starting it later would unblock SIGINT meanwhile
            with children_ignore([signal.SIGINT]):
                events = ctx.Queue()
                context = mp.start_processes(_spawned_worker, args=(nproc, store.port, cfg, result_path, events),
                                             nprocs=nproc, join=False, start_method="spawn")
            while not context.join(timeout=0.2):
                try:
                    while True:
                        event = events.get_nowait()
                        last, deadline = event.what, time.monotonic() + cfg.timeout_s
                        if progress is not None:
                            progress(event)
                except queue.Empty:
                    pass
                if time.monotonic() > deadline:
                    _stop(context)
                    raise AutoplanError(f"cluster profile: no progress for {cfg.timeout_s:g} s after {last!r}; "
                                        f"stopped the {nproc} worker processes")
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as e:
            _stop(context)
            first = str(e).strip().splitlines()
            raise AutoplanError(f"cluster profile: a worker process failed after {last!r}: "
                                f"{first[-1] if first else type(e).__name__}") from None
        except BaseException:       # Ctrl-C, SIGTERM: no worker outlives the command
            if context is not None:
                _stop(context)
            raise
        if not os.path.exists(result_path):
            raise AutoplanError("cluster profile: the workers finished without writing results")
        d = json.loads(Path(result_path).read_text())
    return RankZeroResult(rank_hosts=d["rank_hosts"], layout=_layout_from_json(d["layout"]),
                          raw=RawLinkTimes.from_json(d["raw"]), compute_flops_per_s=d["compute_flops_per_s"],
                          memory_bandwidth_bytes_per_s=d["memory_bandwidth_bytes_per_s"], device_name=d["device_name"],
                          concurrent_compute_flops_per_s=d["concurrent_compute_flops_per_s"])
